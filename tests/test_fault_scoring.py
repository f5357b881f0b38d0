"""The fault benchmark's scoring, baseline detector and batching (benchmarks/faults/), on hand-made inputs."""
import importlib.util
import math
import sys
from pathlib import Path

import pytest

FAULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "faults"


def _load(name):
    if str(FAULTS) not in sys.path:
        sys.path.insert(0, str(FAULTS))  # run.py imports its siblings by name
    spec = importlib.util.spec_from_file_location(f"faults_{name}", FAULTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


score = _load("score")
baseline = _load("baseline")
run = _load("run")


def incident(kind, start, end=None, component=""):
    return {"kind": kind, "start_step": start, "end_step": end, "component": component, "metrics": []}


def alert(id, step, fired_step=None, component=None, last_step=None):
    a = {"id": id, "component": component, "step": step, "last_step": last_step if last_step is not None else step}
    if fired_step is not None:
        a["fired_step"] = fired_step
    return a


def a_run(name, incidents=(), last_step=10_000, split="tune"):
    return {"run": name, "split": split, "last_step": last_step, "incidents": list(incidents)}


# --- windows and true / false alerts ------------------------------------------------

def test_window_ends_50_steps_after_a_labelled_end_and_at_the_last_step_without_one():
    assert score.incident_window(incident("x", 100, 200), 5000) == (100, 250)
    assert score.incident_window(incident("x", 100, None), 5000) == (100, 5000)
    runs = [a_run("r", [incident("spike", 100, 200)])]
    for fired, true in ((99, False), (100, True), (250, True), (251, False)):
        m = score.match_run(runs[0], [alert(1, fired)])
        assert (m["true_alerts"], m["false_alerts"]) == ((1, 0) if true else (0, 1)), fired


def test_open_ended_incident_counts_alerts_until_the_runs_last_step():
    r = a_run("r", [incident("divergence", 1000)], last_step=3000)
    m = score.match_run(r, [alert(1, 2999), alert(2, 3001), alert(3, 999)])
    assert (m["true_alerts"], m["false_alerts"]) == (1, 2)


def test_fired_step_is_used_when_present_else_step():
    r = a_run("r", [incident("spike", 100, 110)])
    # Condition first held at 90 (before the incident) but persistence was met at 105: true.
    assert score.match_run(r, [alert(1, 90, fired_step=105)])["true_alerts"] == 1
    # No fired_step (older console): step decides, and 90 is before the incident.
    assert score.match_run(r, [alert(1, 90)])["false_alerts"] == 1
    assert score.match_run(r, [{**alert(1, 105), "fired_step": None}])["true_alerts"] == 1
    # The alert's interval overlapping the window does not make it true: only when it fired counts.
    assert score.match_run(r, [alert(1, 50, last_step=500)])["false_alerts"] == 1


def test_every_alert_on_a_benign_run_is_false():
    f = score.score([a_run("quiet"), a_run("noisy")], {"noisy": [alert(1, 5), alert(2, 7000)]})
    assert f["alerts"] == 2 and f["false_alerts"] == 2 and f["false_alarm_share"] == 1.0
    assert f["benign_runs"] == 2 and f["benign_runs_alerted"] == 1
    assert f["benign_runs_alerted_names"] == ["noisy"]
    assert f["recall"] is None  # no incidents at all


# --- recall, false alarms, delays ----------------------------------------------------

def test_recall_per_kind_and_overall():
    runs = [
        a_run("a", [incident("nan_weights", 100, 120), incident("loss_spike", 5000, 5010)]),
        a_run("b", [incident("nan_weights", 300, 310)]),
        a_run("c", [incident("loss_spike", 700, None)], last_step=800),
        a_run("d"),
    ]
    alerts = {
        "a": [alert(1, 101), alert(2, 4000)],  # nan_weights detected; the spike at 5000 missed; 4000 false
        "b": [alert(3, 305)],
        "c": [alert(4, 650), alert(5, 760)],  # 650 is before the incident: false
        "d": [alert(6, 1)],
    }
    f = score.score(runs, alerts)
    assert f["recall_by_kind"]["nan_weights"] == {"detected": 2, "incidents": 2, "recall": 1.0}
    assert f["recall_by_kind"]["loss_spike"] == {"detected": 1, "incidents": 2, "recall": 0.5}
    assert f["recall"] == pytest.approx(3 / 4)
    assert (f["false_alerts"], f["alerts"]) == (3, 6)
    assert f["false_alarm_share"] == pytest.approx(0.5)
    assert f["benign_runs_alerted"] == 1


def test_an_alert_inside_two_overlapping_windows_detects_both_and_is_counted_once():
    r = a_run("r", [incident("a", 100, 200), incident("b", 150, 160)])
    f = score.score([r], {"r": [alert(1, 155)]})
    assert f["detected"] == 2 and f["alerts"] == 1 and f["false_alerts"] == 0


def test_delay_is_the_earliest_true_alert_and_median_p90_use_nearest_rank():
    assert score.nearest_rank([1, 2, 3, 4, 5, 6, 7, 8, 9, 100], 90) == 9
    assert score.nearest_rank([5, 1, 3], 90) == 5
    assert score.nearest_rank([1, 2, 3, 4, 5, 6], 90) == 6  # rank ceil(5.4) = 6, not 5
    assert score.nearest_rank([7], 50) == 7
    assert score.nearest_rank([], 90) is None
    runs = [a_run(f"r{i}", [incident("k", 1000)]) for i in range(4)]
    alerts = {
        "r0": [alert(1, 1030), alert(2, 1002)],  # delay 2, not 30
        "r1": [alert(3, 1004)],
        "r2": [alert(4, 1010)],
        "r3": [alert(5, 1100, fired_step=1020)],  # fired_step counts: 20
    }
    f = score.score(runs, alerts)
    assert f["delays"] == [2, 4, 10, 20]
    assert f["median_delay"] == 7  # (4 + 10) / 2
    assert f["p90_delay"] == 20


# --- localization ---------------------------------------------------------------------

def test_localization_judges_the_earliest_true_alert_ties_by_id():
    runs = [
        a_run("a", [incident("nan_weights", 100, 110, component="layers.3")]),
        a_run("b", [incident("nan_weights", 100, 110, component="layers.3")]),
        a_run("c", [incident("nan_weights", 100, 110, component="gpu2")]),
        a_run("d", [incident("slow_node", 100, 110, component="node7")]),  # missed: not in the denominator
        a_run("e", [incident("divergence", 100)]),  # run-level label: not judged
    ]
    alerts = {
        # right component but later than a wrong one: not localized
        "a": [alert(1, 105, component="layers.3"), alert(2, 101, component="layers.9")],
        # same fired step: the smaller id decides, and it names the right component
        "b": [alert(4, 102, component="layers.1"), alert(3, 102, component="layers.3")],
        # a run-level alert (component null) does not name gpu2
        "c": [alert(5, 100, component=None)],
        "d": [],
        "e": [alert(6, 100, component="layers.0")],
    }
    f = score.score(runs, alerts)
    assert f["incidents_with_component"] == 4
    assert (f["localized"], f["localization_incidents"]) == (1, 3)
    assert f["localization"] == pytest.approx(1 / 3)
    per_run = {m["run"]: m for m in f["per_run"]}
    assert per_run["a"]["incidents"][0]["first_component"] == "layers.9"
    assert per_run["b"]["incidents"][0]["first_alert"] == 3
    assert per_run["e"]["incidents"][0]["localized"] is False  # recorded, but not counted


# --- targets, the restore check, text ---------------------------------------------------

def test_targets_are_judged_in_the_right_direction():
    assert score.meets("recall", 0.95) and not score.meets("recall", 0.949)
    assert score.meets("false_alarm_share", 0.05) and not score.meets("false_alarm_share", 0.051)
    assert score.meets("benign_runs_alerted", 0) and not score.meets("benign_runs_alerted", 1)
    assert score.meets("median_delay", 10) and not score.meets("median_delay", 10.5)
    assert score.meets("localization", 0.9) and not score.meets("localization", 0.89)
    assert score.meets("recall", None) is None


def test_alerted_within():
    alerts = [alert(1, 5), alert(2, 122030), alert(3, 122000, fired_step=122015)]
    assert score.alerted_within(alerts, 122002, 20) == 122015
    assert score.alerted_within(alerts[:2], 122002, 20) is None


def test_table_shows_figures_beside_targets():
    f = score.score([a_run("a", [incident("k", 100, 110)]), a_run("b")], {"a": [alert(1, 103)], "b": [alert(2, 5)]})
    text = score.format_table(f, "console, tune")
    assert "| recall | 1.000 (1/1) | ≥ 0.95 | ok |" in text
    assert "| false-alarm share | 0.500 (1/2) | ≤ 0.05 | MISSED |" in text
    assert "1/1 (b)" in text
    assert "| median delay (steps) | 3 | ≤ 10 | ok |" in text


# --- the baseline --------------------------------------------------------------------------

def feed_all(values, metric="loss", component="", start=0, detector=None):
    det = detector or baseline.RollingZ()
    for i, v in enumerate(values):
        det.feed(metric, component, start + i, v)
    return det


def test_baseline_ema_follows_the_stated_recurrences():
    det = feed_all([1.0, 3.0, 2.0])
    n, m, v, _ = det.series[("loss", "")]
    a = 0.97
    m1, v1 = a * 1.0 + (1 - a) * 3.0, a * 0.0 + (1 - a) * (3.0 - 1.0) ** 2
    m2, v2 = a * m1 + (1 - a) * 2.0, a * v1 + (1 - a) * (2.0 - m1) ** 2
    assert n == 3 and m == pytest.approx(m2) and v == pytest.approx(v2)


def test_baseline_warms_up_then_opens_one_alert_per_excursion():
    noise = [1.0, 1.1, 0.9, 1.05, 0.95] * 4  # 20 quiet points
    # A spike inside the warm-up never alerts.
    assert feed_all([1.0, 50.0] + noise).alerts == []
    det = feed_all(noise + [10.0, 12.0, 11.0] + [1.0] * 5 + [30.0])
    assert [(a["fired_step"], a["last_step"], a["component"]) for a in det.alerts] == [(20, 22, None), (28, 28, None)]
    first = det.alerts[0]
    assert first["step"] == first["fired_step"] == 20 and first["magnitude"] > 3
    assert first["state"] == "resolved" and det.alerts[1]["state"] == "firing"


def test_baseline_nonfinite_alerts_and_does_not_move_the_ema():
    det = feed_all([1.0, 1.1, 0.9, 1.05, 0.95] * 3)
    before = list(det.series[("loss", "")][:3])
    feed_all([math.nan, math.inf], start=15, detector=det)
    assert det.series[("loss", "")][:3] == before
    assert len(det.alerts) == 1 and det.alerts[0]["fired_step"] == 15 and det.alerts[0]["last_step"] == 16
    feed_all([1.0], start=17, detector=det)  # an ordinary value closes it
    assert det.alerts[0]["state"] == "resolved"


def test_baseline_series_are_independent_and_zero_variance_is_handled():
    det = baseline.RollingZ()
    for step in range(15):
        det.feed("lr", "", step, 0.5)  # constant: variance 0
        det.feed("grad_norm", "layers.2", step, 1.0 + 0.01 * (step % 3))
    det.feed("lr", "", 15, 0.5)  # equal to the mean: z = 0, no alert
    assert det.alerts == []
    det.feed("lr", "", 16, 0.6)  # any change from a constant: infinite z
    det.feed("grad_norm", "layers.2", 16, 9.0)
    assert [(a["metric"], a["component"]) for a in det.alerts] == [("lr", None), ("grad_norm", "layers.2")]


def test_baseline_reads_contract_lines_in_arrival_order(tmp_path):
    import gzip

    lines = [b'{"type":"run","id":"r1"}', b'{"type":"phase","run":"r1","step":0,"phase":"warmup"}']
    lines += [b'{"type":"point","run":"r1","step":%d,"metric":"loss","value":%s}' % (s, b"1.0" if s % 2 else b"1.1")
              for s in range(12)]
    lines += [b'{"type":"point","run":"r1","step":12,"metric":"loss","value":"NaN"}',
              b'{"type":"point","run":"r1","step":13,"metric":"loss","component":"layers.1","value":NaN}',
              b'{"type":"event","run":"r1","step":13,"component":"node1","condition":"dead","magnitude":1}']
    path = tmp_path / "r1.ndjson.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    run_id, alerts = baseline.detect_file(path)
    assert run_id == "r1"
    assert [(a["fired_step"], a["component"]) for a in alerts] == [(12, None)]  # layers.1 is still warming up


# --- batching in run.py ----------------------------------------------------------------------

def test_batches_cut_every_n_lines_and_repeat_nothing():
    lines = [b'{"type":"run","id":"r"}'] + [b'{"type":"point","run":"r","step":%d,"metric":"loss","value":1}' % s
                                          for s in range(9)]
    bodies = run.batches_of(lines, 4)
    assert [b.count(b"\n") for b in bodies] == [4, 4, 2]
    assert b"".join(bodies) == b"\n".join(lines) + b"\n"
    assert sum(b.count(b'"type":"run"') for b in bodies) == 1 and bodies[0].startswith(b'{"type":"run"')


def test_real_runs_get_the_fixed_split_and_run_level_incidents():
    specs, _ = run.load_labels("real")
    split = {s["key"]: s["split"] for s in specs}
    assert split["pythia-410m-seed4"] == split["pythia-160m-seed4"] == "tune"
    assert split["pythia-410m-seed3"] == split["llmc-gpt2-124m-2024-10-13"] == "heldout"
    seed4 = next(s for s in specs if s["key"] == "pythia-410m-seed4")
    assert seed4["incidents"] == [{"kind": "loss_divergence_after_restart", "start_step": 122002, "end_step": None,
                                   "component": "", "metrics": []}]
    assert [s["key"] for s in run.select(specs, "tune", ["410m"])] == ["pythia-410m-seed4"]
