import logging

from celery import shared_task
from django.contrib.auth import get_user_model
from kombu.exceptions import OperationalError

from alerts.tasks import BROKER
from ingest.models import Run
from retention.prune import prune as prune_now
from retention.purge import LogNames, delete_run as delete_now

log = logging.getLogger(__name__)


@shared_task
def prune():
    """Apply every project's retention policy (beat, hourly: opsconsole/settings.py). Idempotent."""
    counts = prune_now()
    pruned = {slug: c for slug, c in counts.items() if any(c.values())}
    if pruned:
        log.info("retention pruned %s", pruned)
    return counts


@shared_task(acks_late=True)
def delete_run(run_pk, by_pk=None):
    """Delete (or archive) a run in chunks, on a worker. Idempotent: a run already gone is done."""
    run = Run.objects.filter(pk=run_pk).first()
    if run is None:
        return None
    by = get_user_model().objects.filter(pk=by_pk).first() if by_pk else None
    return delete_now(run, by=by).as_dict()


def delete_run_later(run, *, by=None) -> dict:
    """Queue the run's delete and say what it will do (deleted, or archived where the decision log names it).

    A web process serves its sync views on one thread: a delete done in the request (2 s for a 1 M-point
    run) held every other request of that process, other runs' ingest included, for as long
    (benchmarks/delete_run.py --via api). With the broker down it is done here after all.
    """
    archived = LogNames.read().names_run(run)

    def send():
        delete_run.apply_async((run.pk, by.pk if by is not None else None), retry=False)
        return True

    if not BROKER.call(send, errors=(OperationalError, OSError, ConnectionError), fallback=False):
        log.warning("broker unreachable: deleting run %s in the request", run.run_id)
        delete_now(run, by=by)
    return {"run": run.run_id, "archived": archived, "queued": True}
