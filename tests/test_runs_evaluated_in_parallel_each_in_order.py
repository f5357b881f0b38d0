"""Two worker processes on Redis and PostgreSQL: different runs are judged at the same time, each run's batches
one at a time in the order they arrived, so a rule that counts consecutive points across batches fires as it
does when every batch is judged in turn (alerts/tasks.py)."""
import json

import pytest

from alerts.models import Alert
from alerts.tasks import queue_evaluation
from ingest.models import BatchReceipt, Run
from opsconsole.celery import app as celery_app
from tests.factories import make_rule
from tests.worker_support import unevaluated, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

BATCHES = 40
STEPS = 10  # per batch
# Above the threshold, every 20 steps, for three steps across a batch boundary (9, 10, 11: fires) and for two
# (19, 20: does not).
HIGH = {9, 10, 11, 19, 0}


def batch(run_id, b):
    points = []
    for step in range(b * STEPS, (b + 1) * STEPS):
        points.append({"step": step, "metric": "loss", "value": 50.0 if step and step % 20 in HIGH else 1.0})
        points.extend({"step": step, "metric": f"filler_{i}", "value": float(step)} for i in range(8))
    return {"run": {"id": run_id}, "batch_id": f"{run_id}:{b}", "points": points}


def alerts_of(run_id):
    return list(Alert.objects.filter(run__run_id=run_id).order_by("first_step")
                .values_list("rule__name", "first_step", "fired_step", "last_step", "state"))


def overlapping(a, b):
    return a["began"] < b["ended"] and b["began"] < a["ended"]


def test_two_workers_judge_two_runs_at_once_each_in_arrival_order(celery_worker, sender, project, tmp_path):
    make_rule(project, "loss-high", "threshold", scope={"metrics": ["loss"]}, params={"above": 10.0},
              persistence={"points": 3, "resolve_points": 3})
    # The reference: every batch judged as it arrives, in this process.
    celery_app.conf.task_always_eager = True
    for b in range(BATCHES):
        assert sender.post(batch("serial", b)).status_code == 202
    celery_app.conf.task_always_eager = False
    serial = alerts_of("serial")
    assert len(serial) == BATCHES // 2  # one per 20 steps: the three-step stretches

    for run_id in ("a", "b"):
        for b in range(BATCHES):
            assert sender.post(batch(run_id, b)).status_code == 202
    assert len(unevaluated()) == 2 * BATCHES
    # Messages need not come in the order their batches arrived (a lost one queued again by the sweep, one
    # delivered again after its worker died): here the newest first, the two runs' alternating, all before
    # any worker runs.
    celery_app.control.purge()
    newest_first = BatchReceipt.objects.order_by("-pk").values_list("run__run_id", "pk")
    by_run = {run_id: [pk for r, pk in newest_first if r == run_id] for run_id in ("a", "b")}
    for pair in zip(by_run["a"], by_run["b"]):
        for receipt_id in pair:
            assert queue_evaluation(receipt_id)

    record = tmp_path / "evaluations.jsonl"
    args = ("--include", "tests.evaluation_recorder")
    # Four batches at once at most (alerts/batches.py): ten evaluations a run, so the two runs' overlap in time.
    env = {"EVALUATION_RECORD": record, "EVALUATION_BATCHES_AT_ONCE": 4}
    with celery_worker(wait_ready=False, args=args, **env) as first, \
            celery_worker(wait_ready=False, args=args, **env) as second:
        assert wait_until(lambda: not unevaluated(), 120), first.output()[-3000:] + second.output()[-3000:]

    lines = [json.loads(line) for line in record.read_text().splitlines()]
    runs = dict(Run.objects.filter(run_id__in=["a", "b"]).values_list("run_id", "pk"))
    for run_id, run_pk in runs.items():
        judged = [line["receipt"] for line in lines if line["run"] == run_pk]
        # Each batch judged once, in the order it was received.
        assert judged == list(BatchReceipt.objects.filter(run_id=run_pk).order_by("pk").values_list("pk", flat=True))
        assert alerts_of(run_id) == serial
    # Both processes judged batches, and some batch of a was being judged while one of b was, in the other process.
    assert len({line["pid"] for line in lines}) == 2
    of_a = [line for line in lines if line["run"] == runs["a"]]
    of_b = [line for line in lines if line["run"] == runs["b"]]
    assert any(overlapping(x, y) and x["pid"] != y["pid"] for x in of_a for y in of_b)
