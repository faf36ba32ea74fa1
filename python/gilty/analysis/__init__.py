"""Pure functions over a ``Session``: state shares, top functions, GIL blame, convoys, verdict.

``summarise(session)`` runs them all and is what the renderers read.
"""

from gilty.analysis.summary import Summary, ThreadSummary, summarise

__all__ = ["Summary", "ThreadSummary", "summarise"]
