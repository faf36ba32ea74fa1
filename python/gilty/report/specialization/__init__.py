"""`gilty specialization`'s outputs: ``text``, ``json`` and ``html`` of a ``SpecializationResult``
(``text`` and ``json`` also of Python 3.10's ``OpcacheResult``)."""
