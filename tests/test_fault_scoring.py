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


# --- lasting faults: still open at the run's end (issue 20) ------------------------------------

def stated(id, step, state, metric="loss", component=None, rule="loss-spike"):
    return {**alert(id, step, component=component), "state": state, "metric": metric,
            "rule": {"name": rule, "permitted_response": "notify"}}


def console_incident(id, step, state, alerts=(), rule="loss-spike", metric="loss", component=None):
    return {"id": id, "first_step": step, "state": state, "alerts": list(alerts), "severity": "notify",
            "origin": {"alert": alerts[0] if alerts else None, "rule": rule, "metric": metric, "component": component,
                       "step": step}}


def test_a_lasting_fault_counts_as_open_at_the_end_only_with_an_open_alert():
    runs = [
        a_run("open", [incident("divergence", 1000)], last_step=3000),
        a_run("quiet-again", [incident("divergence", 1000)], last_step=3000),
        a_run("acked", [incident("divergence", 1000)], last_step=3000),
        a_run("missed", [incident("divergence", 1000)], last_step=3000),
        a_run("ends", [incident("spike", 100, 120)], last_step=3000),  # has an end: not lasting
    ]
    alerts = {
        # the first alert resolved, a later one of the same fault still fires: open
        "open": [stated(1, 1002, "resolved"), stated(2, 1500, "firing")],
        # fired at once, resolved itself 200 steps later: the fault went quiet while it lasted
        "quiet-again": [stated(3, 1002, "resolved")],
        "acked": [stated(4, 1002, "acknowledged"), stated(5, 999, "firing")],  # 999 is before the fault: not its alert
        "missed": [],
        "ends": [stated(6, 101, "resolved")],
    }
    f = score.score(runs, alerts)
    assert (f["lasting_faults"], f["lasting_detected"], f["lasting_open"]) == (4, 3, 2)
    assert f["lasting_open_at_end"] == pytest.approx(2 / 3)
    assert score.meets("lasting_open_at_end", f["lasting_open_at_end"]) is False
    assert score.meets("lasting_open_at_end", 1.0) is True
    per = {m["run"]: m["incidents"][0] for m in f["per_run"]}
    assert per["open"]["open_at_end"] is True and per["quiet-again"]["open_at_end"] is False
    assert per["missed"]["open_at_end"] is None and per["ends"]["open_at_end"] is None and per["ends"]["lasting"] is False
    assert "| lasting faults with an alert still open at the end | 0.667 (2/3 detected; 4 labelled without an end) | = 1.0 | MISSED |" \
        in score.format_table(f, "console, heldout")
    assert "RESOLVED before the end" in score.format_run_line(next(m for m in f["per_run"] if m["run"] == "quiet-again"))


def test_a_lasting_fault_is_open_while_any_of_its_incidents_is_not_resolved():
    runs = [a_run(name, [incident("divergence", 1000)], last_step=3000)
            for name in ("firing", "review", "muted", "resolved", "later", "none")]
    incidents = {
        "firing": [console_incident("a", 1002, "firing")],
        "review": [console_incident("b", 1002, "needs_review")],  # a hard invariant nobody looked at: still in the inbox
        "muted": [console_incident("c", 1002, "muted")],
        "resolved": [console_incident("d", 1002, "resolved"), console_incident("e", 900, "firing")],  # e: before the fault
        "later": [console_incident("f", 1002, "resolved"), console_incident("g", 2500, "acknowledged")],
        "none": [],
    }
    f = score.score_incidents(runs, incidents)
    assert (f["lasting_faults"], f["lasting_detected"], f["lasting_open"]) == (6, 5, 4)
    assert f["lasting_open_at_end"] == pytest.approx(4 / 5)
    per = {m["run"]: m["faults"][0] for m in f["per_run"]}
    assert [name for name, fault in per.items() if fault["open_at_end"] is False] == ["resolved"]
    assert per["later"]["states"] == ["resolved", "acknowledged"] and per["none"]["open_at_end"] is None
    text = score.format_incident_table(f, "console, incidents, heldout", "console")
    assert "| lasting faults still open at the end | 0.800 (4/5 detected; 6 labelled without an end) | = 1.0 | MISSED |" in text


def test_no_lasting_fault_detected_is_not_a_pass_or_a_miss():
    f = score.score_incidents([a_run("r", [incident("spike", 10, 20)])], {"r": [console_incident("a", 12, "resolved")]})
    assert (f["lasting_faults"], f["lasting_open_at_end"]) == (0, None)
    assert "| = 1.0 | n/a |" in score.format_incident_table(f, "t", "console")


def test_the_false_incidents_of_a_run_are_listed_by_origin_and_step():
    r = a_run("r", [incident("spike", 500, 510)])
    alerts = [stated(1, 205, "resolved", metric="throughput", rule="throughput-drop"), stated(2, 501, "resolved")]
    incidents = [console_incident(9, 200, "resolved", [1], rule="throughput-drop", metric="throughput"),
                 console_incident(10, 501, "resolved", [2])]
    [m] = score.score_incidents([r], {"r": incidents}, {"r": alerts})["per_run"]
    assert m["false"] == [{"id": 9, "step": 205, "rule": "throughput-drop", "metric": "throughput", "component": "",
                           "severity": "notify", "state": "resolved", "alerts": 1}]


def test_the_stand_in_state_follows_the_consoles_order():
    def grouped(*states):
        (inc,) = score.group_alerts("r", [stated(i, 10, s) for i, s in enumerate(states)])
        return inc["state"], inc["resolved_at"]

    assert grouped("resolved", "acknowledged")[0] == "acknowledged"
    assert grouped("muted", "resolved")[0] == "muted"
    assert grouped("muted", "acknowledged", "resolved")[0] == "acknowledged"
    assert grouped("resolved", "firing")[0] == "firing"
    assert grouped("resolved", "resolved")[0] == "resolved"
    assert grouped("acknowledged")[1] is None  # not resolved: no resolved_at


# --- the real runs, one by one ------------------------------------------------------------------

def test_the_real_runs_block_judges_each_failed_restore_and_lists_the_benign_runs_pages():
    runs = [
        a_run("pythia-410m-seed4", [incident("loss_divergence_after_restart", 122002)], last_step=143000, split="tune"),
        a_run("pythia-410m-seed3", [incident("loss_divergence_after_restart", 75002)], last_step=143000, split="heldout"),
        a_run("pythia-160m-seed9", last_step=143000, split="heldout"),
        a_run("llmc", last_step=19560, split="heldout"),
    ]
    alerts = {
        "pythia-410m-seed4": [stated(1, 122004, "resolved")],
        # fired 25 steps after the restore: too late; a second alert keeps the fault open
        "pythia-410m-seed3": [stated(2, 75027, "resolved"), stated(3, 90000, "firing")],
        "pythia-160m-seed9": [stated(4, 22010, "resolved")],
    }
    incidents = {
        "pythia-410m-seed4": [console_incident("i1", 122004, "resolved", [1])],
        "pythia-410m-seed3": [console_incident("i2", 75027, "resolved", [2]), console_incident("i3", 90000, "needs_review", [3])],
        "pythia-160m-seed9": [console_incident("i4", 22010, "resolved", [4])],
    }
    check = score.real_runs_check(runs, alerts, incidents)
    seed4, seed3 = check["faults"]
    assert (seed4["alerted"], seed4["delay"], seed4["open_at_end"], seed4["alert_open_at_end"]) == (True, 2, False, False)
    assert (seed3["alerted"], seed3["delay"], seed3["open_at_end"], seed3["open_states"]) == (False, None, True, ["needs_review"])
    assert seed3["alert_open_at_end"] is True
    assert [(b["run"], [p["step"] for p in b["pages"]]) for b in check["benign"]] == [("pythia-160m-seed9", [22010]), ("llmc", [])]
    text = score.format_real_runs(check, "console")
    assert ("- pythia-410m-seed4 [tune], loss_divergence_after_restart at 122,002: alerted within 20 steps: yes (+2, fired at "
            "step 122,004); still open or needing review at the last step (143,000): NO (resolved)") in text
    assert "alerted within 20 steps: NO; still open or needing review at the last step (143,000): yes (needs_review)" in text
    assert "- pythia-160m-seed9 [heldout, benign]: paged: loss-spike (loss) at 22,010, resolved" in text
    assert "- llmc [heldout, benign]: paged: none" in text
    many = score.real_runs_check(runs[:1], alerts, {"pythia-410m-seed4": [console_incident(f"i{n}", 122004 + n, "resolved")
                                                                         for n in range(7)]})
    assert "still open or needing review at the last step (143,000): NO (7 incidents: 7 resolved)" in score.format_real_runs(many, "b")
    pages = score.real_runs_check([runs[3]], {}, {"llmc": [console_incident(n, 100 * n, "resolved") for n in range(1, 8)]})
    assert score.format_real_runs(pages, "b").endswith(
        "paged: 7: loss-spike (loss) at 100, resolved; loss-spike (loss) at 200, resolved; loss-spike (loss) at 300, resolved; "
        "loss-spike (loss) at 400, resolved; loss-spike (loss) at 500, resolved; … 2 more")


def test_run_py_judges_only_the_real_runs_in_the_block():
    runs = [{**a_run("pythia-410m-seed4", [incident("x", 122002)], last_step=143000), "corpus": "real"},
            {**a_run("faults-benign-s0"), "corpus": "generated"}]
    check = run.real_runs(runs, {}, {})
    assert [f["run"] for f in check["faults"]] == ["pythia-410m-seed4"] and check["benign"] == []
    assert check["faults"][0]["alerted"] is False and check["faults"][0]["open_at_end"] is False
