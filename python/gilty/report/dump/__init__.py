"""`gilty dump`'s outputs of a ``Dump``: ``text`` and ``json``; ``tasks`` and ``await_cycles`` draw
its asyncio tasks (``dump --tasks``)."""
