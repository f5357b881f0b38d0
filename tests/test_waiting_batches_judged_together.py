"""A run's batches that wait for evaluation (a worker behind ingest, a broker back from a restart) are judged
together, up to EVALUATION_BATCHES_AT_ONCE batches and EVALUATION_POINTS_AT_ONCE points (alerts/batches.py): a
backlog clears in fewer, larger evaluations, and what fires is what fires when each batch is judged as it
arrives, a lasting throughput drop that runs from `steady` into `lr_decay` included (it stays open)."""
import math

import orjson
import pytest

from alerts import tasks
from alerts.models import Alert, AlertChange
from alerts.signals import batch_evaluated
from alerts.starter import install_starter_pack
from ingest.models import BatchReceipt

STEPS, PER_BATCH = 160, 8  # 20 batches
DROP_FROM, NAN_AT = 70, 40
PHASES = [(0, "warmup"), (20, "steady"), (120, "lr_decay")]


def bodies(run_id):
    """Twenty batches of a run: noisy loss, throughput and two layers' gradient norms, a NaN loss, and throughput
    halved from step 70 to the end (steps twice as slow), through the change to lr_decay at 120."""
    out = []
    for first in range(0, STEPS, PER_BATCH):
        points = []
        for step in range(first, first + PER_BATCH):
            wobble = math.sin(step * 1.7) * 0.02
            slow = step >= DROP_FROM
            when = 1_700_000_000 + step * 0.5 + max(0, step - DROP_FROM) * 0.5
            loss = float("nan") if step == NAN_AT else 3.0 - step / 200 + wobble
            points.append({"step": step, "metric": "loss", "value": "NaN" if math.isnan(loss) else loss, "time": when})
            points.append({"step": step, "metric": "tokens_per_s", "value": (500.0 if slow else 1000.0) * (1 + wobble),
                           "time": when})
            for layer in ("layers.0", "layers.1"):
                points.append({"step": step, "metric": "grad_norm", "component": layer, "value": 1.0 + wobble,
                               "time": when})
        body = {"run": {"id": run_id}, "points": points}
        phases = [{"step": s, "phase": p} for s, p in PHASES if first <= s < first + PER_BATCH]
        if phases:
            body["phases"] = phases
        out.append(orjson.dumps(body))
    return out


def post(sender, body):
    return sender.client.post("/api/v1/ingest", body, content_type="application/json",
                              HTTP_AUTHORIZATION=f"Bearer {sender.token}")


def alerts_of(run_id):
    return sorted(Alert.objects.filter(run__run_id=run_id).values_list(
        "rule__name", "component", "metric", "first_step", "fired_step", "last_step", "state"))


@pytest.fixture
def judged(project, sender, settings, monkeypatch, django_capture_on_commit_callbacks):
    """Stores a run's batches as a worker that is behind would find them, then drains the run as the worker does;
    returns the batches each evaluation judged."""
    install_starter_pack(project)

    def judge(run_id, at_once, points_at_once=100_000):
        settings.EVALUATION_BATCHES_AT_ONCE, settings.EVALUATION_POINTS_AT_ONCE = at_once, points_at_once
        for body in bodies(run_id):
            with django_capture_on_commit_callbacks(execute=False):  # stored; their tasks not run yet
                assert post(sender, body).status_code == 202
        evaluations = []

        def record(sender, receipts=(), **kwargs):
            evaluations.append([r.pk for r in receipts])

        batch_evaluated.connect(record, dispatch_uid="test.judged_together")
        try:
            monkeypatch.setitem(tasks.evaluate_batch.app.conf, "task_always_eager", False)
            monkeypatch.setattr(tasks, "DRAIN_SECONDS", 3600)
            receipts = list(BatchReceipt.objects.filter(run__run_id=run_id).order_by("pk").values_list("pk", flat=True))
            assert tasks.drain_run(BatchReceipt.objects.get(pk=receipts[0]).run_id) == receipts
        finally:
            batch_evaluated.disconnect(dispatch_uid="test.judged_together")
        assert not BatchReceipt.objects.filter(run__run_id=run_id, evaluated_at__isnull=True).exists()
        return evaluations

    return judge


def test_a_backlog_is_judged_in_few_evaluations_with_the_same_alerts(judged):
    one_by_one = judged("one-by-one", at_once=1)
    together = judged("together", at_once=8)

    assert [len(e) for e in one_by_one] == [1] * 20
    assert [len(e) for e in together] == [8, 8, 4]  # arrival order, at most eight at once
    assert sum(together, []) == sorted(sum(together, []))
    assert alerts_of("together") == alerts_of("one-by-one")
    # Each change names the batch that brought its step, not the last batch of its evaluation (the chronicle
    # reads what came before a restart from the batches' order).
    nan = AlertChange.objects.get(alert__run__run_id="together", alert__rule__name="nonfinite-loss", kind="fired")
    assert nan.receipt.min_step <= NAN_AT <= nan.receipt.max_step
    fired = {name: (first, state) for name, _, _, first, _, _, state in alerts_of("together")}
    assert fired["nonfinite-loss"][0] == NAN_AT
    # The drop lasts to the last step, across the change to lr_decay: open, and extended to the end.
    assert fired["throughput-drop"] == (DROP_FROM, "firing")
    drop = Alert.objects.get(run__run_id="together", rule__name="throughput-drop")
    assert drop.last_step == STEPS - 1
    # One "extended" row per evaluation that extended it, not one per batch.
    extended = AlertChange.objects.filter(alert=drop, kind="extended").count()
    assert 1 <= extended <= 2 < AlertChange.objects.filter(
        alert__run__run_id="one-by-one", alert__rule__name="throughput-drop", kind="extended").count()


def test_the_points_bound_stops_an_evaluation_before_it_grows_past_it(judged):
    per_batch = PER_BATCH * 4
    evaluations = judged("bounded", at_once=20, points_at_once=3 * per_batch)
    assert [len(e) for e in evaluations] == [3] * 6 + [2]


def test_a_bad_bound_stops_the_start(tmp_path):
    from tests.test_settings_fail_loudly import start

    for name in ("EVALUATION_BATCHES_AT_ONCE", "EVALUATION_POINTS_AT_ONCE"):
        result = start({name: "0"}, tmp_path)
        assert result.returncode != 0 and name in result.stderr
