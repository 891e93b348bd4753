import importlib
import os
from typing import Any

from celery import Celery, signals
from kombu.transport import sqlalchemy

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


class SQLiteBroker(sqlalchemy.Transport):
    """The no-server broker (settings.py): kombu's SQLAlchemy transport on a SQLite file.

    It looks for new messages often: the sync must reach the pages within 2 s. (kombu would
    hand a polling_interval transport option to create_engine, which refuses it.)
    """

    polling_interval = 0.1


app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_init.connect
def _worker_metrics(**kwargs: Any) -> None:
    # By name, as settings name middleware: the tasks' modules import this app, and the
    # metrics read the models; only a worker wires them, once Django is set up.
    importlib.import_module("portal.metrics").connect_celery()
