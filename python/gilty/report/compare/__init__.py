"""`gilty compare`'s outputs of a ``Comparison``: ``text``, ``json``, and for two recordings the
differential flame graph as ``svg`` or in an ``html`` page."""
