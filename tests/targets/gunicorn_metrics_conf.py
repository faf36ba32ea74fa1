"""gunicorn config: the two lines a team adds for gilty under prometheus_client multiprocess mode
(post_fork starts the exporter, child_exit marks a dead worker's gauges), plus the test's spinners."""


def post_fork(server, worker):
    import gilty.observe.prometheus
    import gunicorn_metrics_app

    gilty.observe.prometheus.export_multiprocess(period=0.5)
    gunicorn_metrics_app.start_spinners()


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
