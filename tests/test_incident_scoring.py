"""The fault benchmark's incident level (benchmarks/faults/): the client-side stand-in that groups a
run's alerts into incidents, incident scoring, and where run.py takes incidents from."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

FAULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "faults"


def _load(name):
    if str(FAULTS) not in sys.path:
        sys.path.insert(0, str(FAULTS))  # run.py imports its siblings by name
    spec = importlib.util.spec_from_file_location(f"faults_incidents_{name}", FAULTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


score = _load("score")
run = _load("run")


def alert(id, fired, metric="loss", component=None, response="notify", state="firing"):
    return {"id": id, "step": fired, "last_step": fired, "fired_step": fired, "metric": metric, "component": component,
            "rule": {"name": f"rule-{metric}", "permitted_response": response}, "state": state}


def fault(kind, start, end=None, component=""):
    return {"kind": kind, "start_step": start, "end_step": end, "component": component, "metrics": []}


def a_run(name, faults=(), last_step=1000, split="heldout"):
    return {"run": name, "split": split, "last_step": last_step, "incidents": list(faults)}


def incident(id, first_step, component="", alerts=(), metric="weight_norm"):
    return {"id": id, "first_step": first_step, "alerts": list(alerts),
            "origin": {"alert": alerts[0] if alerts else None, "rule": "r", "metric": metric, "component": component,
                       "step": first_step}}


# --- the stand-in: grouping and origin -------------------------------------------------

def test_alerts_within_five_steps_of_the_previous_one_form_one_incident():
    alerts = [alert(1, 100), alert(2, 103), alert(3, 108), alert(4, 114), alert(5, 500)]
    groups = score.group_alerts("r", alerts)
    # 100 -> 103 -> 108 chain (each within 5 of the previous); 114 is 6 after 108; 500 is alone.
    assert [g["alerts"] for g in groups] == [[1, 2, 3], [4], [5]]
    assert [g["first_step"] for g in groups] == [100, 114, 500]
    assert all(g["run"] == "r" for g in groups)


def test_origin_is_weights_then_activations_then_gradients_then_loss_then_earliest():
    alerts = [
        alert(1, 300, "loss"),
        alert(2, 300, "grad_norm", "fc1"),
        alert(3, 301, "act_norm", "fc2"),
        alert(4, 302, "weight_norm", "fc2"),
        alert(5, 300, "throughput"),
    ]
    (only,) = score.group_alerts("r", alerts)
    assert only["origin"]["alert"] == 4 and only["origin"]["component"] == "fc2" and only["origin"]["metric"] == "weight_norm"
    # The rest is the blast radius (the origin's own metric and component excluded).
    assert {"metric": "weight_norm", "component": "fc2"} not in only["blast_radius"]
    assert {"metric": "grad_norm", "component": "fc1"} in only["blast_radius"]
    # Without the weight alert, the activation names the origin; within a class the earliest wins.
    (again,) = score.group_alerts("r", alerts[:3] + [alert(6, 299, "act_norm", "fc1")])
    assert again["origin"]["alert"] == 6 and again["origin"]["component"] == "fc1"
    # Loss before anything else of the system layer.
    (system,) = score.group_alerts("r", [alert(7, 10, "throughput"), alert(8, 12, "loss")])
    assert system["origin"]["alert"] == 8


def test_stand_in_severity_is_the_highest_permitted_response_and_state_firing_while_any_fires():
    alerts = [alert(1, 5, response="observe", state="resolved"), alert(2, 6, response="stop", state="firing"),
              alert(3, 7, response="review", state="resolved")]
    (inc,) = score.group_alerts("r", alerts)
    assert inc["severity"] == "stop" and inc["state"] == "firing"
    (done,) = score.group_alerts("r", [alert(1, 5, state="resolved")])
    assert done["state"] == "resolved"


# --- incident scoring ------------------------------------------------------------------

def test_incident_recall_false_alarms_benign_runs_and_delay():
    runs = [
        a_run("jump", [fault("weight_jump", 400, None, "fc2")]),
        a_run("stall", [fault("stall", 300, 429)]),
        a_run("quiet"),
        a_run("noisy"),
    ]
    incidents = {
        "jump": [incident("a", 402, "fc2", [1]), incident("b", 100, "", [2])],  # b: before the fault, false
        "stall": [incident("c", 470, "")],  # inside [300, 429 + 50]
        "noisy": [incident("d", 50, "")],
    }
    f = score.score_incidents(runs, incidents)
    assert (f["faults"], f["detected"], f["recall"]) == (2, 2, 1.0)
    assert (f["incidents"], f["false_incidents"]) == (4, 2) and f["false_alarm_share"] == 0.5
    assert f["benign_runs"] == 2 and f["benign_runs_alerted"] == 1 and f["benign_runs_alerted_names"] == ["noisy"]
    assert f["delays"] == [2, 170] and f["median_delay"] == 86 and f["p90_delay"] == 170


def test_a_missed_fault_lowers_recall_and_has_no_delay():
    runs = [a_run("x", [fault("nan", 200, None, "fc1")]), a_run("y", [fault("nan", 200, None, "fc1")])]
    f = score.score_incidents(runs, {"x": [incident("a", 150, "fc1")]})  # before the fault: false, not a detection
    assert f["recall"] == 0.0 and f["median_delay"] is None and f["localization"] is None
    assert f["recall_by_kind"]["nan"] == {"detected": 0, "incidents": 2, "recall": 0.0}


def test_localization_judges_the_origin_of_the_earliest_true_incident():
    runs = [
        a_run("named", [fault("weight_jump", 400, None, "fc2")]),
        a_run("wrong", [fault("weight_jump", 400, None, "fc2")]),
        a_run("later", [fault("weight_jump", 400, None, "conv.1")]),
        a_run("runlevel", [fault("label_onset", 300)]),  # no component: not part of localization
    ]
    incidents = {
        "named": [incident("a", 401, "fc2")],
        "wrong": [incident("b", 400, "fc1"), incident("c", 401, "fc2")],  # the first true one names fc1
        "later": [incident("d", 405, "conv.1"), incident("e", 420, "head")],
        "runlevel": [incident("f", 301, "head")],
    }
    f = score.score_incidents(runs, incidents)
    assert (f["localized"], f["localization_incidents"], f["incidents_with_component"]) == (2, 3, 3)
    assert f["localization"] == pytest.approx(2 / 3)
    wrong = next(m for m in f["per_run"] if m["run"] == "wrong")["faults"][0]
    assert wrong["localized"] is False and wrong["origin_component"] == "fc1" and wrong["incidents"] == 2


def test_alerts_per_incident_and_incidents_per_fault():
    runs = [a_run("a", [fault("nan", 100, None, "fc1")]), a_run("b", [fault("nan", 100, None, "fc1")])]
    incidents = {
        "a": [incident("1", 100, "fc1", list(range(10)))],
        "b": [incident("2", 100, "fc1", [20]), incident("3", 130, "fc1", [21, 22]), incident("4", 160, "fc1", [23])],
    }
    f = score.score_incidents(runs, incidents)
    assert f["median_alerts_per_incident"] == 1.5 and f["max_alerts_per_incident"] == 10
    assert f["median_incidents_per_fault"] == 2 and f["max_incidents_per_fault"] == 3
    assert score.meets("median_alerts_per_incident", 2) is True
    assert score.meets("median_alerts_per_incident", 2.5) is False


def test_an_incident_is_placed_at_its_alerts_fired_step_when_they_are_known():
    r = a_run("r", [fault("stall", 300, 310)])
    # The endpoint's first_step is where a condition began (290, before the fault); its alert fired at 305.
    inc = incident("x", 290, "", [7])
    with_alerts = score.score_incidents([r], {"r": [inc]}, {"r": [alert(7, 305)]})
    assert with_alerts["detected"] == 1 and with_alerts["delays"] == [5]
    # Without the alert list, first_step is all there is.
    alone = score.score_incidents([r], {"r": [inc]})
    assert alone["detected"] == 0 and alone["false_incidents"] == 1


def test_stand_in_and_scoring_together_one_fault_many_alerts_is_one_incident():
    r = a_run("nan", [fault("nan_weight", 312, None, "fc1")], last_step=361)
    alerts = [alert(1, 312, "weight_norm", "fc1")] + [alert(i, 312, "grad_norm", c) for i, c in
                                                     ((2, "embed"), (3, "fc2"), (4, "head"))] + [alert(5, 312, "loss")]
    grouped = {"nan": score.group_alerts("nan", alerts)}
    f = score.score_incidents([r], grouped, {"nan": alerts})
    assert f["incidents"] == 1 and f["max_alerts_per_incident"] == 5 and f["localization"] == 1.0
    # At the alert level the same alerts are five true alerts.
    assert score.score([r], {"nan": alerts})["alerts"] == 5


def test_incident_table_shows_figures_beside_targets():
    r = a_run("r", [fault("x", 10, None, "fc1")])
    f = score.score_incidents([r], {"r": [incident("a", 12, "fc1", [1, 2, 3])]})
    text = score.format_incident_table(f, "console, incidents, heldout", "stand-in")
    assert "| recall | 1.000 (1/1) | ≥ 0.95 | ok |" in text
    assert "| alerts per incident, median / max | 3 / 3 | median ≤ 2 | MISSED |" in text
    assert "stand-in" in text.splitlines()[0]


# --- where run.py takes incidents from -------------------------------------------------

class FakeClient:
    def __init__(self, status, body):
        self.status, self.body, self.paths = status, body, []

    def request(self, method, path, body=None, headers=None):
        self.paths.append((method, path))
        return self.status, json.dumps(self.body).encode()


def test_incidents_are_read_from_the_endpoint_when_it_answers_200():
    listed = [incident(1, 5, "fc1", [3])]
    client = FakeClient(200, listed)
    assert run.read_incidents(client, "my run/1") == listed
    assert client.paths == [("GET", "/api/v1/incidents/?run=my%20run%2F1&limit=500&offset=0")]
    assert run.read_incidents(FakeClient(200, {"results": listed}), "r") == listed


def test_a_404_means_no_endpoint_and_other_errors_stop_the_benchmark():
    assert run.read_incidents(FakeClient(404, {"detail": "Not found."}), "r") is None
    with pytest.raises(run.Failure):
        run.read_incidents(FakeClient(500, {"detail": "boom"}), "r")


def test_the_source_is_the_console_or_the_named_stand_in():
    alerts = [alert(1, 10), alert(2, 12), alert(3, 40)]
    console = {"a": {"run": "a", "alerts": alerts, "incidents": [incident(9, 10, "", [1, 2, 3])]}}
    out, source = run.incidents_of(console)
    assert source == run.CONSOLE_INCIDENTS and out["a"][0]["id"] == 9
    missing = {"a": {"run": "a", "alerts": alerts, "incidents": None}}
    out, source = run.incidents_of(missing)
    assert "stand-in" in source and "404" in source
    assert [i["alerts"] for i in out["a"]] == [[1, 2], [3]]
    mixed = {**console, "b": {"run": "b", "alerts": alerts, "incidents": None}}
    assert run.incidents_of(mixed)[1].startswith("mixed:")
