"""`gilty memory`'s outputs: ``text`` and ``json`` of a ``MemorySession``."""
