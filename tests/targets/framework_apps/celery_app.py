"""A Celery app on kombu's filesystem transport (a folder for a broker: nothing listens): the worker
writes a file when it is ready."""

import os
from pathlib import Path

from celery import Celery
from celery.signals import worker_ready

from common import work

FOLDER = Path(os.environ.get("FRAMEWORK_CELERY_DIR", "/tmp/gilty-celery"))
(FOLDER / "queue").mkdir(parents=True, exist_ok=True)
app = Celery("celery_app", broker="filesystem://")
app.conf.update(
    broker_transport_options={"data_folder_in": str(FOLDER / "queue"), "data_folder_out": str(FOLDER / "queue"),
                              # kombu's exchange table, else a "control" folder in the working directory
                              "control_folder": str(FOLDER / "control"),
                              "store_processed": False, "polling_interval": 0.02},
    task_ignore_result=True,
    worker_hijack_root_logger=False,
)


@app.task
def celery_job():
    return work()


@worker_ready.connect
def _ready(**_):
    (FOLDER / "ready").write_text("ready")
