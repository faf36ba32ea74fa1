"""A recording's outputs (``gilty record``, ``gilty report``), one module per format: ``text`` (with
``text_processes`` for several processes and ``text_exact`` for --exact), ``json``, ``html``, ``svg``,
``speedscope``, ``collapsed``, ``chrome_trace``, ``gecko``, ``pprof``; ``tasks`` and ``event_loops`` are the asyncio
parts several formats share."""
