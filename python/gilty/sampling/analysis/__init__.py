"""Pure functions over a ``Session``: state shares, top functions, GIL blame, convoys, verdict.

``summarise(session)`` runs them all and is what the renderers read. The names below load
``gilty.sampling.analysis.summary`` on first use, so that importing one light submodule (``syscalls``,
as `gilty dump` does) does not import every analysis.
"""

__all__ = ["Summary", "ThreadSummary", "summarise"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from gilty.sampling.analysis import summary

        return getattr(summary, name)
    raise AttributeError(f"module 'gilty.sampling.analysis' has no attribute {name!r}")
