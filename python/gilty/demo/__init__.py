"""The bundled demo: ``python -m gilty.demo`` (what ``make demo`` runs).

Starts :mod:`gilty.demo.service`, a small task scheduler whose metrics thread hogs the GIL,
records it with ``gilty record`` and prints the diagnosis; see ``__main__`` for the steps.
"""
