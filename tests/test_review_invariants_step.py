"""Step 2 of a review: non-finite values, gaps and stalls, lagging ranks, data contracts, checkpoints."""
import json

import pytest

from ingest.models import Run
from reviews.steps.checkpoints import last_checkpoint_step
from reviews.steps.hard_invariants import invariants
from tests.factories import make_alert, make_rule
from tests.review_support import open_review, section_rows, send, series

pytestmark = pytest.mark.django_db


def loss(steps, **kw):
    return series("loss", steps, [3.0 - s / 1000 for s in steps], **kw)


def check(step, name):
    [row] = [r for r in step["findings"]["rows"] if r["check"] == name]
    return row


def test_a_nan_fails_the_step_naming_the_component_and_its_first_step(sender):
    grads = [1.0] * 100
    grads[57] = grads[58] = "NaN"
    send(sender, "nan", loss(range(100)) + series("grad_norm", range(100), grads, component="layers.3.attn")
         + series("grad_norm", range(100), [1.0] * 100, component="layers.4.attn"))
    step = invariants(open_review("nan"))
    assert step["state"] == "fail"
    assert "grad_norm on layers.3.attn at step 57" in step["summary"]
    assert section_rows(step, "nonfinite") == [{
        "layer": "numerics", "metric": "grad_norm", "component": "layers.3.attn", "first_step": 57, "count": 2,
        "href": "/runs/nan/?metric=grad_norm&component=layers.3.attn&start=7&end=107"}]
    assert any("step 57" in e["label"] for e in step["evidence"])
    json.dumps(step, allow_nan=False)


def test_a_nan_before_the_last_review_is_not_news(sender):
    send(sender, "old-nan", loss(range(50)) + series("loss", [50], ["Infinity"]))
    first = open_review("old-nan")
    send(sender, "old-nan", loss(range(51, 100)))
    assert invariants(open_review("old-nan", previous=first))["state"] == "pass"
    assert invariants(open_review("old-nan"))["state"] == "fail"  # without a previous review: the whole run


def test_a_gap_in_the_loss_asks_for_attention(sender):
    send(sender, "gap", loss(range(0, 100)))
    send(sender, "gap", loss(range(150, 200)))
    step = invariants(open_review("gap"))
    assert step["state"] == "attention"
    assert check(step, "missing steps and stalls")["state"] == "attention"
    assert section_rows(step, "gaps") == [{"from_step": 100, "to_step": 149, "missing": 50, "cadence": 1}]


def test_a_gap_between_attempts_is_a_restart_not_a_gap(sender):
    send(sender, "restarted", loss(range(0, 100)))
    send(sender, "restarted", loss(range(80, 120)))  # rewound to 80: the current attempt has no gap
    assert section_rows(invariants(open_review("restarted")), "gaps") == []


def test_an_open_absence_alert_is_a_stall_and_fails(sender, project):
    send(sender, "stuck", loss(range(0, 100)))
    rule = make_rule(project, kind="absence", scope={"metrics": ["loss"], "component": ""})
    make_alert(rule, run=Run.objects.get(run_id="stuck"), component="", first_step=100, magnitude=40)
    step = invariants(open_review("stuck"))
    assert step["state"] == "fail" and step["findings"]["stalled"] is True
    assert "missing-data open since step 100" in check(step, "missing steps and stalls")["detail"]
    [row] = section_rows(step, "absence")
    assert row["first_step"] == 100 and row["href"].startswith("/inbox/?state=all&project=pretrain&rule=")


def test_a_stalled_rank_is_named_with_how_far_it_lags(sender):
    points = loss(range(0, 1000, 10), seconds_per_step=1.0)
    for rank in range(4):
        last = 300 if rank == 2 else 1000
        points += series("step_time", range(0, last, 10), [0.5] * len(range(0, last, 10)), component=f"rank{rank}",
                         seconds_per_step=1.0)
    send(sender, "ranks", points)
    step = invariants(open_review("ranks"))
    assert step["state"] == "attention"
    [row] = section_rows(step, "sync")
    assert (row["metric"], row["component"], row["last_step"], row["lag_steps"], row["lag_seconds"]) == (
        "step_time", "rank2", 290, 700, 700.0)
    assert "rank2 (step_time) last at step 290, 700 steps behind" in step["summary"]


def test_a_missed_checkpoint_and_the_work_at_risk(sender):
    phases = [{"step": s, "phase": "checkpoint"} for s in (100, 200, 300)] + [{"step": s + 1, "phase": "steady"} for s in (100, 200, 300)]
    send(sender, "ckpt", loss(range(0, 520)), phases=phases)
    step = invariants(open_review("ckpt"))
    assert step["state"] == "attention"
    assert step["findings"]["checkpoint"] == {"checkpoints": 3, "last_checkpoint_step": 300, "usual_interval": 100.0,
                                              "steps_since": 219, "missed": True}
    assert "missed checkpoint: 219 steps since the last (step 300), usually every 100" in step["summary"]
    assert step["findings"]["work_at_risk_steps"] == 219
    assert last_checkpoint_step(Run.objects.get(run_id="ckpt")) == 300


def test_checkpoints_on_their_cadence_pass_with_the_work_at_risk(sender):
    phases = [{"step": s, "phase": "checkpoint"} for s in (100, 200, 300, 400)]
    send(sender, "ckpt-ok", loss(range(0, 450)), phases=phases)
    step = invariants(open_review("ckpt-ok"))
    assert step["state"] == "pass"
    assert check(step, "checkpoint integrity")["detail"] == "last checkpoint at step 400; 49 steps at risk"


def test_a_checkpoint_of_a_history_thrown_away_by_a_rewind_does_not_count(sender):
    send(sender, "rw", loss(range(0, 300)), phases=[{"step": 100, "phase": "checkpoint"}, {"step": 250, "phase": "checkpoint"}])
    send(sender, "rw", loss(range(150, 200)))  # rewound to 150: the checkpoint at 250 was never reached again
    assert last_checkpoint_step(Run.objects.get(run_id="rw")) == 100


def test_corrupt_records_break_the_data_contract_from_their_first_step(sender):
    corrupt = [0.0] * 100
    corrupt[40] = 3.0
    send(sender, "data", loss(range(100)) + series("corrupt_records", range(100), corrupt)
         + series("dup_rate", range(100), [0.01] * 100))
    step = invariants(open_review("data"))
    assert step["state"] == "attention"
    [row] = section_rows(step, "data")
    assert (row["metric"], row["first_step"], row["worst"], row["threshold"]) == ("corrupt_records", 40, 3.0, "above 0")


def test_a_clean_run_passes_and_a_run_without_points_has_no_data(sender):
    send(sender, "clean", loss(range(100)) + series("dup_rate", range(100), [0.01] * 100),
         phases=[{"step": 50, "phase": "checkpoint"}])
    step = invariants(open_review("clean"))
    assert step["state"] == "pass", step["summary"]
    send(sender, "empty", [])
    assert invariants(open_review("empty"))["state"] == "no_data"
