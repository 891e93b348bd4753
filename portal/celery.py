import importlib
import os
from typing import Any

from celery import Celery, signals
from kombu.transport import sqlalchemy
from sqlalchemy.exc import IntegrityError, OperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


class SQLiteBrokerChannel(sqlalchemy.Channel):
    def _open(self) -> Any:
        # The same with the tables of a new broker file: each process looks, then creates
        # them. The one that finds a table made meanwhile opens again, and then sees it.
        for _ in range(len(sqlalchemy.metadata.tables)):
            try:
                return super()._open()
            except OperationalError as error:
                if "already exists" not in str(error):
                    raise
        return super()._open()

    def _get_or_create(self, queue: str) -> Any:
        # kombu guards the look-then-insert of a queue's row with a lock of its process only:
        # the web sending the first task while the worker declares the queue made one of them
        # fail on the row's unique name, and a worker that fails there stops for good.
        try:
            return super()._get_or_create(queue)
        except IntegrityError:
            self.session.rollback()
            return self.session.query(self.queue_cls).filter(self.queue_cls.name == queue).one()


class SQLiteBroker(sqlalchemy.Transport):
    """The no-server broker (settings.py): kombu's SQLAlchemy transport on a SQLite file.

    It looks for new messages often: the sync must reach the pages within 2 s. (kombu would
    hand a polling_interval transport option to create_engine, which refuses it.)
    """

    Channel = SQLiteBrokerChannel
    polling_interval = 0.1


app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The default app of every thread: claims enqueues through celery.current_app, never portal.
app.set_default()
app.autodiscover_tasks()
app.autodiscover_tasks(["claims.worker"])  # claims/worker/tasks.py


@signals.worker_init.connect
def _worker_metrics(**kwargs: Any) -> None:
    # By name, as settings name middleware: the tasks' modules import this app, and the
    # metrics read the models; only a worker wires them, once Django is set up.
    importlib.import_module("portal.metrics").connect_celery()


@signals.worker_ready.connect
@signals.worker_process_init.connect
def _set_aside_the_startup_heap(**kwargs: Any) -> None:
    # Ready: the tasks and what they import are loaded (a thread pool runs them in this
    # process); a prefork pool's child does it once forked (portal/startup_heap.py).
    importlib.import_module("portal.startup_heap").set_aside()


# A task carries the id of the request that sent it, so its log lines join the request's.
REQUEST_ID_HEADER = "portal_request_id"


@signals.before_task_publish.connect
def _send_request_id(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    from portal.request_id import NO_REQUEST, request_id

    current = request_id.get()
    if headers is not None and current != NO_REQUEST:
        headers.setdefault(REQUEST_ID_HEADER, current)


@signals.task_prerun.connect
@signals.task_postrun.connect
def _tidy_database_connections(task: Any = None, **kwargs: Any) -> None:
    # What Django does around each request, around each task: a connection that failed or
    # outlived CONN_MAX_AGE is closed, a sound one kept. (Celery's own fixup would close every
    # connection around every task, a new PostgreSQL session per task; CELERY_DB_REUSE_MAX
    # in settings.py keeps it from doing so.)
    # Not for a task run eagerly, inside its caller's transaction (as Celery's fixup).
    if task is None or getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()


@signals.task_prerun.connect
def _take_request_id(task: Any = None, **kwargs: Any) -> None:
    from portal.request_id import NO_REQUEST, request_id

    sent = getattr(task.request, REQUEST_ID_HEADER, None) if task is not None else None
    request_id.set(incoming_or_none(sent) or NO_REQUEST)


@signals.task_postrun.connect
def _drop_request_id(**kwargs: Any) -> None:
    from portal.request_id import NO_REQUEST, request_id

    request_id.set(NO_REQUEST)  # a pool thread takes the next task with none


def incoming_or_none(value: Any) -> str | None:
    from portal.request_id import ACCEPTED

    return value if isinstance(value, str) and ACCEPTED.match(value) else None
