import os

from celery import Celery
from celery.signals import task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")

app = Celery("opsconsole")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
def _check_database_connections(task=None, **kwargs):
    """A worker keeps its connection from task to task (CELERY_DB_REUSE_MAX): check it as the pool would on checkout."""
    if task is not None and not getattr(task.request, "is_eager", False):
        from opsconsole.db import drop_dead_connections

        drop_dead_connections()
