import os

from celery import Celery
from celery.app.amqp import AMQP
from celery.signals import task_prerun
from kombu import Connection

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")

# How often a worker and beat try a lost broker again. Kombu backs off 2, 4, 6 ... up to 30 s, so after a 20-s
# Redis outage a worker could sit idle for 10 s more, and nothing is evaluated until it reconnects; one attempt a
# second (a refused connection costs nothing) puts evaluation back within about a second of Redis's return.
RECONNECT_SECONDS = 1.0


class BrokerConnection(Connection):
    """A broker connection whose retries (the worker's consumer, beat) come every RECONNECT_SECONDS."""

    def _ensure_connection(self, errback=None, max_retries=None, interval_start=RECONNECT_SECONDS / 2,
                           interval_step=RECONNECT_SECONDS / 2, interval_max=RECONNECT_SECONDS, *args, **kwargs):
        return super()._ensure_connection(errback, max_retries, interval_start, interval_step,
                                          min(interval_max, RECONNECT_SECONDS), *args, **kwargs)


class BrokerAMQP(AMQP):
    Connection = BrokerConnection


app = Celery("opsconsole", amqp=BrokerAMQP)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
def _check_database_connections(task=None, **kwargs):
    """A worker keeps its connection from task to task (CELERY_DB_REUSE_MAX): check it as the pool would on checkout."""
    if task is not None and not getattr(task.request, "is_eager", False):
        from opsconsole.db import drop_dead_connections

        drop_dead_connections()
