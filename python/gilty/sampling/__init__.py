"""The GIL sampler's capability: attaching and launching (``launch``, ``processes``), the recorded
data model (``session``), the per-pass aggregation the native sampler hands over (``aggregate``),
thread-state names (``thread_states``) and the analysis over a session (``analysis``)."""
