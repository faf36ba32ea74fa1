"""Free-threading readiness (`gilty record … --free-threading`, docs/free-threading.md): would this
process run faster on a free-threaded build (3.14t, 3.15t), and which of its extension modules
would turn the GIL back on there.

``bound`` is the arithmetic (pure, on state shares), ``modules`` reads the target's extension
modules and where they came from, ``analysis`` joins both per process and per thread pool into a
``Readiness`` (``model``) with its verdict, which every report format shows.
"""
