"""In-process observability: the GIL monitor a process runs on itself (``monitor``), its exporters
(``prometheus``, ``otel``), the sidecar that serves a target's figures from outside (``sidecar``) and
the pytest plugin (``pytest_plugin``). Users import them by these paths: ``gilty.observe.monitor``,
``gilty.observe.prometheus``, ``gilty.observe.otel``."""
