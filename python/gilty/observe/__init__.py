"""In-process observability: the GIL monitor a process runs on itself (``monitor``), its exporters
(``prometheus``, ``otel``), the sidecar that serves a target's figures from outside (``sidecar``) and
the pytest plugin (``pytest_plugin``). Users import them by their kept paths: ``gilty.monitor``,
``gilty.prometheus``, ``gilty.otel``."""
