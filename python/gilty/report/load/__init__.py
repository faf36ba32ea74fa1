"""`gilty load`'s outputs: ``text``, ``json`` and ``html`` of a ``LoadRun``, and ``locust_text``,
``locust_json`` and ``locust_html`` of a ``LocustResult``."""
