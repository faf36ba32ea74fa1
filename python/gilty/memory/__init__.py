"""``gilty memory``: shared and private memory of a prefork process tree over time, copy-on-write
split by cause (garbage collection or not), GC configuration, warnings and a summary.

- ``session``: the measured data (``MemorySession``), fed by ``_native.MemoryMonitor`` batches;
- ``analysis``: pure functions over a session: copy-on-write per process, warnings, savings, summary;
- ``render_text`` / ``render_json``: the two report formats (docs/memory.md documents the JSON).
"""
