"""Metrics target: serves gilty's Prometheus collector on 127.0.0.1:PORT (or exports OTLP to a URL)
while two threads spin forever (each holds the GIL about half the time and waits the other half).
Usage: metrics_spinners.py prometheus PORT | otlp URL SECONDS"""

import sys
import threading
import time


def spin():
    while True:
        pass


mode = sys.argv[1]
if mode == "prometheus":
    import prometheus_client

    import gilty.observe.prometheus

    gilty.observe.prometheus.register()
    prometheus_client.start_http_server(int(sys.argv[2]), addr="127.0.0.1")
else:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    import gilty.observe.otel

    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=sys.argv[2]), export_interval_millis=500)
    provider = MeterProvider(metric_readers=[reader])
    gilty.observe.otel.register(provider)

for i in range(2):
    threading.Thread(target=spin, name=f"spinner-{i}", daemon=True).start()
print("ready", flush=True)
if mode == "prometheus":
    time.sleep(3600)
else:
    import gc

    # Collect early: the pause reaches the histogram from the listener thread within a period, well
    # before the last export.
    gc.collect()
    time.sleep(float(sys.argv[3]))
    provider.shutdown()  # flushes the last export
