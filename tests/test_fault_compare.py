"""benchmarks/faults/compare.py: two `run.py --json` outputs compared fault by fault at the incident level."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

FAULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "faults"


def _load(name):
    if str(FAULTS) not in sys.path:
        sys.path.insert(0, str(FAULTS))
    spec = importlib.util.spec_from_file_location(f"faults_compare_{name}", FAULTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


score = _load("score")
compare = _load("compare")


def fault(kind, start, end=None, component=""):
    return {"kind": kind, "start_step": start, "end_step": end, "component": component, "metrics": []}


def a_run(name, faults=(), last_step=3000, split="heldout"):
    return {"run": name, "split": split, "last_step": last_step, "incidents": list(faults)}


def inc(id, step, state="resolved", rule="loss-spike", metric="loss", component=None):
    return {"id": id, "first_step": step, "state": state, "alerts": [], "severity": "notify",
            "origin": {"alert": None, "rule": rule, "metric": metric, "component": component, "step": step}}


RUNS = [
    a_run("div", [fault("divergence", 1000)]),
    a_run("jump", [fault("weight_jump", 400, 420, "fc2")]),
    a_run("stall", [fault("stall", 300, 430)]),
    a_run("benign"),
    a_run("tuned", [fault("stall", 300, 430)], split="tune"),
]


def document(incidents, code):
    """What run.py --json writes under console_incidents (the rest of the file is not read)."""
    out = {"code": code, "console_incidents": {}}
    for split in ("heldout", "tune", "all"):
        chosen = [r for r in RUNS if split == "all" or r["split"] == split]
        out["console_incidents"][split] = score.score_incidents(chosen, incidents)
    return json.loads(json.dumps(out))  # as read back from the file


BEFORE = document({
    "div": [inc("a", 1002, "resolved")],  # went quiet while the fault lasted
    "jump": [inc("b", 402, component="fc1", metric="grad_norm", rule="gradient-explosion")],
    "stall": [inc("c", 305, rule="throughput-drop", metric="throughput")],
    "benign": [inc("d", 100, rule="throughput-drop", metric="throughput"), inc("e", 2000), inc("f", 2500, metric="val_loss")],
    "tuned": [inc("t", 301)],
}, "git before")
AFTER = document({
    "div": [inc("a2", 1004, "firing")],  # later, but open at the end
    "jump": [inc("b2", 401, component="fc2", metric="weight_norm", rule="weight-jump")],
    "stall": [],  # lost
    "benign": [inc("d2", 104, rule="throughput-drop", metric="throughput"), inc("g", 2800, rule="slow-steps", metric="step_time")],
    "tuned": [],
}, "git after")


def test_false_pages_are_paired_by_origin_and_nearby_step_and_the_rest_removed_or_added():
    kept, removed, added = compare.pair_false_pages(
        [{"rule": "r", "metric": "m", "component": "", "step": 100}, {"rule": "r", "metric": "m", "component": "", "step": 200}],
        [{"rule": "r", "metric": "m", "component": "", "step": 215}, {"rule": "r", "metric": "m", "component": "x", "step": 100},
         {"rule": "r", "metric": "m", "component": "", "step": 104}], tolerance=10)
    assert [(b["step"], a["step"]) for b, a in kept] == [(100, 104)]
    assert [b["step"] for b in removed] == [200]  # 15 steps from the nearest one of its origin
    assert sorted((a["step"], a["component"]) for a in added) == [(100, "x"), (215, "")]


def test_each_run_says_what_changed_on_the_held_out_half():
    result = compare.compare(BEFORE, AFTER, "heldout")
    runs = {r["run"]: r for r in result["runs"]}
    assert set(runs) == {"div", "jump", "stall", "benign"}  # the tune half is not compared
    benign = runs["benign"]
    assert [p["step"] for p in benign["false_removed"]] == [2000, 2500]
    assert [p["step"] for p in benign["false_added"]] == [2800]
    assert [(b["step"], a["step"]) for b, a in benign["false_moved"]] == [(100, 104)]
    assert [c["fault"]["kind"] for c in runs["stall"]["lost"]] == ["stall"] and runs["stall"]["lost"][0]["delay_before"] == 5
    assert runs["div"]["delays"] == [{"fault": runs["div"]["delays"][0]["fault"], "before": 2, "after": 4}]
    assert [(c["before"], c["after"]) for c in runs["div"]["lasting"]] == [(False, True)]
    [origin] = runs["jump"]["origins"]
    assert origin["before"] == ("fc1", "grad_norm") and origin["after"] == ("fc2", "weight_norm")
    assert (origin["localized_before"], origin["localized_after"]) == (False, True)
    t = result["totals"]
    assert (t["false_before"], t["false_after"], t["false_removed"], t["false_added"]) == (3, 2, 2, 1)
    assert (t["faults"], t["faults_lost"], t["faults_gained"]) == (3, 1, 0)
    assert (t["delays_changed"], t["delays_shorter"], t["delays_longer"]) == (2, 1, 1)  # div 2 → 4, jump 2 → 1
    assert (t["lasting_now_open"], t["lasting_no_longer_open"]) == (1, 0)
    assert result["lasting"] == {"before": [0, 1], "after": [1, 1]}


def test_a_gained_fault_and_runs_only_one_file_has():
    after = json.loads(json.dumps(AFTER))
    before = json.loads(json.dumps(BEFORE))
    stall = next(m for m in after["console_incidents"]["heldout"]["per_run"] if m["run"] == "stall")
    after["console_incidents"]["heldout"]["per_run"] = [m for m in after["console_incidents"]["heldout"]["per_run"] if m["run"] != "benign"]
    result = compare.compare(AFTER, BEFORE, "heldout")  # the other way round: the stall is gained
    assert result["totals"]["faults_gained"] == 1 and result["totals"]["faults_lost"] == 0
    assert stall["faults"][0]["detected"] is False
    assert compare.compare(before, after, "heldout")["only_before"] == ["benign"]


def test_the_text_names_every_change_and_ends_with_the_summary_and_figures():
    text = compare.format_comparison(compare.compare(BEFORE, AFTER, "heldout"), "before.json", "after.json")
    assert text.splitlines()[0] == "## Incident-level changes, heldout (console): before.json (git before) → after.json (git after)"
    assert "  fault LOST: stall at 300 (delay 5 before, missed after)" in text
    assert "  false pages removed: 2 (loss-spike (loss) at 2,000, resolved; loss-spike (val_loss) at 2,500, resolved)" in text
    assert "  false pages added: 1 (slow-steps (step_time) at 2,800, resolved)" in text
    assert "  open at the end: divergence at 1,000: resolved → open" in text
    assert "  origin: weight_jump@fc2 at 400: grad_norm@fc1 → weight_norm@fc2 (localized False → True)" in text
    assert ("summary (heldout, 4 runs, 3 faults): false pages 3 → 2 (removed 2, added 1); faults lost 1, gained 0; "
            "delays changed 2 (1 shorter, 1 longer); origins changed 1; lasting faults open at the end 0/1 → 1/1 "
            "(1 now open, 0 no longer)") in text
    assert ("figures: recall 1.000 → 0.667; false-page share 0.500 → 0.500; benign runs paged 1 → 1; "
            "median delay 2 → 2.5; origin = faulty component 0.000 → 1.000;") in text
    assert "lasting faults open at the end 0.000 → 1.000" in text
    assert "0 of 4 runs unchanged" in text


def test_an_older_file_without_the_list_of_false_pages_is_compared_by_counts():
    before = json.loads(json.dumps(BEFORE))
    for m in before["console_incidents"]["heldout"]["per_run"]:
        del m["false"]
    result = compare.compare(before, AFTER, "heldout")
    benign = next(r for r in result["runs"] if r["run"] == "benign")
    assert benign["counts_only"] and (benign["false_removed"], benign["false_added"]) == (1, 0)
    assert result["totals"]["counts_only"] is True


def test_the_command_reads_two_files_and_fails_clearly_without_the_split(tmp_path, capsys):
    b, a = tmp_path / "b.json", tmp_path / "a.json"
    b.write_text(json.dumps(BEFORE))
    a.write_text(json.dumps(AFTER))
    assert compare.main([str(b), str(a), "--json", str(tmp_path / "diff.json")]) == 0
    assert "summary (heldout" in capsys.readouterr().out
    assert json.loads((tmp_path / "diff.json").read_text())["totals"]["faults_lost"] == 1
    partial = {"code": "x", "console_incidents": {"tune": BEFORE["console_incidents"]["tune"]}}
    a.write_text(json.dumps(partial))
    assert compare.main([str(b), str(a)]) == 2
    assert "split 'heldout' is not in `console_incidents` (it has: tune)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare.main([str(b)])
