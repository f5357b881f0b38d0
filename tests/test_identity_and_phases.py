"""Identity changes are kept with their step; phases hold until the next entry, ties resolved as the contract says
(the later entry carries on; the other holds at its own step only, tests/test_phases_at_one_step.py)."""
import pytest

pytestmark = pytest.mark.django_db


def post(sender, run, points=(), phases=()):
    response = sender.post({"run": run, "phases": list(phases), "points": [{"step": s, "metric": "loss", "value": 1.0} for s in points]})
    assert response.status_code == 202, response.content
    return response


def test_changed_code_rev_and_config_are_recorded_with_the_step_they_arrived_at(sender):
    post(sender, {"id": "idr", "code_rev": "aaa111", "config": {"lr": 0.1}, "data_snapshot": "snap-1"}, points=range(0, 10))
    post(sender, {"id": "idr", "code_rev": "bbb222", "config": {"lr": 0.05}, "data_snapshot": "snap-1"}, points=range(10, 20))
    post(sender, {"id": "idr", "name": "added later"}, points=range(20, 30))  # adding a field is not a change
    run = sender.get("/api/v1/runs/idr/").json()
    assert run["code_rev"] == "bbb222" and run["config"] == {"lr": 0.05} and run["name"] == "added later"
    changes = [(c["field"], c["old"], c["new"], c["step"]) for c in run["identity_changes"]]
    assert changes == [("code_rev", "aaa111", "bbb222", 10), ("config", {"lr": 0.1}, {"lr": 0.05}, 10)]


def test_phase_spans_follow_entries_and_later_time_carries_on_from_a_tie(sender):
    post(
        sender,
        {"id": "ph"},
        points=range(0, 5),
        phases=[
            {"step": 0, "phase": "warmup"},
            {"step": 100, "phase": "eval", "time": 20.0},
            {"step": 100, "phase": "checkpoint", "time": 10.0},  # earlier time loses the tie
            {"step": 120, "phase": "my-custom-phase"},
        ],
    )
    spans = sender.get("/api/v1/runs/ph/").json()["phase_spans"]
    assert spans == [
        {"start": 0, "end": 99, "phase": "warmup", "kind": "warmup"},
        {"start": 100, "end": 100, "phase": "checkpoint", "kind": "checkpoint"},  # earlier time: that step only
        {"start": 100, "end": 119, "phase": "eval", "kind": "eval"},
        {"start": 120, "end": None, "phase": "my-custom-phase", "kind": "steady"},  # free text counts as steady
    ]


def test_same_step_same_time_goes_to_the_later_position(sender):
    post(sender, {"id": "ph2"}, phases=[{"step": 5, "phase": "eval", "time": 1.0}, {"step": 5, "phase": "steady", "time": 1.0}])
    spans = sender.get("/api/v1/runs/ph2/").json()["phase_spans"]
    assert [(s["start"], s["end"], s["phase"]) for s in spans] == [(5, 5, "eval"), (5, None, "steady")]
