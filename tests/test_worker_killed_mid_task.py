"""A worker killed with `kill -9` in the middle of an evaluation: the batch is delivered again and evaluated.

Tasks are acknowledged late, so the dead worker's message stays unacknowledged
on Redis; after the visibility timeout (EVALUATION_VISIBILITY_TIMEOUT, short
here) the next worker gets it. Beat's sweep is the second line, for batches
whose message was lost altogether (tests/test_evaluation_survives_redis_down.py).
"""
import pytest
from django.db import connection

from ingest.models import BatchReceipt, Run
from tests.worker_support import admin_connection, session, unevaluated, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

VISIBILITY = 3  # seconds; a deployment's must exceed its longest evaluation


def evaluation_blocked(admin):
    """The worker's database session while it waits, mid-evaluation, for the run's row (its pid), or None."""
    row = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock' AND query ILIKE 'UPDATE %%ingest_run%%'",
        [connection.settings_dict["NAME"]],
    ).fetchone()
    return row and row[0]


def session_gone(admin, pid):
    return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0] == 0


def test_a_batch_whose_worker_was_killed_mid_evaluation_is_evaluated_by_the_next_worker(celery_worker, sender):
    points = [{"step": s, "metric": "loss", "value": 1.5} for s in range(50)]
    assert sender.post({"run": {"id": "killed"}, "points": points}).status_code == 202
    [receipt] = BatchReceipt.objects.all()
    assert unevaluated() == {receipt.pk}  # queued on Redis; no worker yet
    run_pk = Run.objects.get(run_id="killed").pk
    connection.close()

    with admin_connection() as admin:
        # Another session holds the run's row: the evaluation stops halfway (batch claimed, run not yet updated).
        with session(autocommit=False) as blocker:
            blocker.execute("SELECT 1 FROM ingest_run WHERE id = %s FOR UPDATE", [run_pk])
            with celery_worker(wait_ready=False, EVALUATION_VISIBILITY_TIMEOUT=VISIBILITY) as first:
                assert wait_until(lambda: evaluation_blocked(admin), 60), first.output()[-3000:]
                pid = evaluation_blocked(admin)
                first.kill()  # SIGKILL to the whole worker: no ack, no cleanup
        # The dead worker's session ends once it runs again and finds its client gone; its claim rolls back.
        assert wait_until(lambda: session_gone(admin, pid), 30)
    assert unevaluated() == {receipt.pk}

    with celery_worker(EVALUATION_VISIBILITY_TIMEOUT=VISIBILITY) as second:
        assert wait_until(lambda: not unevaluated(), 30), second.output()[-3000:]
    assert Run.objects.get(run_id="killed").last_step == 49
