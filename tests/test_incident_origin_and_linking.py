"""How alerts are judged into incidents (alerts/incidents.py): which alert is the origin, which are linked,
the window, the severity and the blast radius. Plain objects stand for alerts: the judging reads attributes."""
from itertools import count, permutations
from types import SimpleNamespace

import pytest

from alerts import incidents

_ids = count(1)


def alert(metric="", component="", step=100, magnitude=1.0, condition="", rule="nonfinite-gradients", kind="nonfinite",
          response="notify", state="firing"):
    return SimpleNamespace(
        pk=next(_ids), metric=metric, component=component, first_step=step, magnitude=magnitude, condition=condition,
        state=state, reviewed_at=None, resolved_at=None, rule=SimpleNamespace(name=rule, kind=kind, permitted_response=response),
    )


def test_causal_order_comes_before_the_step_and_the_order_alerts_arrive_in():
    loss = alert("loss", step=97)
    grads = alert("grad_norm", "layers.2", step=98)
    acts = alert("act_norm", "layers.5", step=99)
    weights = alert("weight_norm", "layers.5", step=100)
    for order in permutations([loss, grads, acts, weights]):
        assert incidents.origin_of(list(order)) is weights
    assert incidents.origin_of([loss, grads, acts]) is acts
    assert incidents.origin_of([loss, grads]) is grads


def test_then_the_earliest_step_then_the_magnitude_beyond_the_band():
    early, late = alert("grad_norm", "layers.1", step=100, magnitude=3), alert("grad_norm", "layers.2", step=101, magnitude=90)
    assert incidents.origin_of([late, early]) is early
    band = {"rule": "gradient-explosion", "kind": "band"}
    small, big = alert("grad_norm", "layers.1", magnitude=12.0, **band), alert("grad_norm", "layers.8", magnitude=40.0, **band)
    unknown = alert("grad_norm", "layers.3", magnitude=None, **band)
    assert incidents.origin_of([small, unknown, big]) is big


def test_a_non_finite_value_is_beyond_any_band():
    nan = alert("weight_norm", "layers.4", magnitude=1)  # non-finite: its magnitude counts points in a row
    jump = alert("weight_norm", "layers.9", rule="weight-jump", kind="weight_jump", magnitude=20)
    assert incidents.origin_of([jump, nan]) is nan


def test_a_metrics_alert_is_named_before_an_event_of_the_same_signal():
    # The client's `unclassified` event may name the first component in forward order without knowing the origin.
    event = alert(condition="unclassified", component="embed", magnitude=10, rule="job-health-events", kind="event")
    weights = alert("weight_norm", "layers.4", magnitude=1)
    assert incidents.origin_of([event, weights]) is weights
    assert incidents.signal_of(event) == incidents.WEIGHTS


def test_a_weight_jump_judges_the_weights():
    jump = alert("weight_norm", "layers.3", rule="weight-jump", kind="weight_jump", magnitude=20)
    overflow = alert("grad_norm", "layers.2", rule="nonfinite-gradients", magnitude=1)
    loss = alert("loss", rule="loss-spike", kind="band", step=99, magnitude=80)
    assert incidents.origin_of([loss, overflow, jump]) is jump
    ratio_rule = alert("update_ratio", "layers.3", rule="update-weight-ratio", kind="threshold")
    grads = alert("grad_norm", "layers.1", step=99)
    assert incidents.origin_of([grads, ratio_rule]) is ratio_rule
    assert incidents.signal_of(alert("update_ratio", "layers.3", rule="frozen-component")) == incidents.GRADIENTS


def test_model_signals_are_linked_within_the_window_other_signals_only_at_the_same_step():
    loss = alert("loss", step=101)
    grads = [alert("grad_norm", f"layers.{i}", step=108) for i in range(3)]
    stall = alert("throughput", "gpu0", step=104, rule="throughput-drop", kind="band")
    same_step_stall = alert("throughput", "gpu1", step=101, rule="throughput-drop", kind="band")
    gap = alert("loss", step=103, rule="missing-data", kind="absence")
    groups = [[loss]]
    assert incidents.place(grads[0], groups, window=10) == 0
    assert incidents.place(grads[0], groups, window=5) is None  # 7 steps apart: a project may want them apart
    assert incidents.place(stall, groups, window=10) is None
    assert incidents.place(gap, groups, window=10) is None  # missing data says nothing about where in the model
    assert incidents.place(same_step_stall, groups, window=10) == 0


def test_the_window_is_counted_from_the_incidents_first_step():
    groups = [[alert("loss", step=100)]]
    assert incidents.place(alert("grad_norm", "a", step=110), groups, window=10) == 0
    assert incidents.place(alert("grad_norm", "a", step=111), groups, window=10) is None
    assert incidents.place(alert("grad_norm", "a", step=90), groups, window=10) == 0  # a late batch's earlier step


def test_severity_is_the_highest_permitted_response_and_the_blast_radius_the_rest():
    origin = alert("weight_norm", "layers.4", response="notify")
    others = [alert("grad_norm", "layers.1", response="review"), alert("grad_norm", "layers.2"),
              alert("loss", rule="nonfinite-loss", response="stop"), alert("grad_norm", "layers.4")]
    group = [origin, *others]
    assert incidents.severity_of(group) == "stop"
    assert incidents.severity_of([origin]) == "notify"
    assert incidents.blast_radius(group, origin) == [
        {"metric": "grad_norm", "component": "layers.1"}, {"metric": "grad_norm", "component": "layers.2"},
        {"metric": "grad_norm", "component": "layers.4"}, {"metric": "loss", "component": None},
    ]


@pytest.mark.parametrize("states, expected", [
    (["firing", "acknowledged", "resolved"], "firing"),
    (["muted", "acknowledged", "resolved"], "acknowledged"),
    (["muted", "resolved"], "muted"),
    (["resolved", "resolved"], "needs_review"),
])
def test_the_state_follows_the_alerts(states, expected):
    assert incidents.state_of([alert("grad_norm", str(i), state=s) for i, s in enumerate(states)]) == expected


def test_an_incident_is_resolved_once_its_hard_invariants_were_looked_at():
    looked_at = alert("grad_norm", "a", state="resolved")
    looked_at.reviewed_at = "2026-01-01"
    band = alert("grad_norm", "b", state="resolved", rule="gradient-explosion", kind="band")
    assert incidents.state_of([looked_at, band]) == "resolved"
