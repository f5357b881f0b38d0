#!/usr/bin/env python
"""Check the generated fault corpus: every line through the project's contract validator, the
labels against the files, no non-finite value in benign runs, and each fault visible in its data.

    DJANGO_SETTINGS_MODULE=tests.settings .venv/bin/python benchmarks/faults/check_corpus.py [--corpus DIR]

Exit 1 on any failed check. Prints, per fault run, the faulty series before and after the start.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

from ingest.contract import ContractError, parse_ndjson  # noqa: E402
from ingest.management.commands.import_jsonl import split_requests  # noqa: E402

WIRE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def value(v):
    return WIRE[v] if isinstance(v, str) else float(v)


def load(path: Path):
    raw = gzip.decompress(path.read_bytes())
    return raw, [json.loads(line) for line in raw.splitlines() if line.strip()]


def segments(raw: bytes):
    """The file cut before each run line after the first (a run that announces a new config, e.g. a
    batch change, sends a second run line mid-stream): each part is sent as import_jsonl would."""
    numbered = list(enumerate(raw.split(b"\n"), start=1))
    starts = [i for i, (_, line) in enumerate(numbered) if line.startswith(b'{"type":"run"')]
    bounds = [0] + starts[1:] + [len(numbered)]
    for a, b in zip(bounds, bounds[1:]):
        yield numbered[a:b]


def validate(raw: bytes) -> tuple[int, int, list]:
    points = requests = 0
    errors = []
    for run, chunk in (rc for part in segments(raw) for rc in split_requests(part)):
        try:
            batch = parse_ndjson(b"\n".join(line for _, line in chunk))
        except ContractError as exc:
            errors.extend(exc.errors[:5])
            continue
        requests += 1
        points += len(batch.points)
    return points, requests, errors


def series(lines, metric, component=None, first_attempt=True):
    """step -> value of one series (the first arrival of each step by default)."""
    out = {}
    for line in lines:
        if line.get("type") == "point" and line["metric"] == metric and line.get("component") == component:
            if first_attempt and line["step"] in out:
                continue
            out[line["step"]] = value(line["value"])
    return out


def mean(values):
    values = [v for v in values if math.isfinite(v)]
    return statistics.fmean(values) if values else math.nan


def window(s, lo, hi):
    return [s[i] for i in range(lo, hi + 1) if i in s]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus")
    args = ap.parse_args()
    labels = json.loads((args.corpus / "labels.json").read_text())
    failures = []
    total = 0
    for rid, label in labels["runs"].items():
        path = args.corpus / label["file"]
        total += path.stat().st_size
        raw, lines = load(path)
        points, requests, errors = validate(raw)
        if errors:
            failures.append(f"{rid}: contract errors {errors}")
        if lines[0].get("type") != "run" or lines[0].get("id") != rid:
            failures.append(f"{rid}: first line is not its run line")
        last_step = max(l["step"] for l in lines if l.get("type") == "point")
        nonfinite = sum(1 for l in lines if l.get("type") == "point" and isinstance(l["value"], str))
        times = [l["time"] for l in lines if l.get("type") == "point"]
        back_in_time = sum(1 for a, b in zip(times, times[1:]) if b < a)
        head = f"{rid:34s} {label['split']:7s} {path.stat().st_size / 1024:5.0f} KiB {len(lines):6d} lines {points:6d} points {requests} req, last step {last_step}"
        if back_in_time:
            failures.append(f"{rid}: time goes backwards {back_in_time} times")
        for inc in label["incidents"]:
            # Every label names its kind, origin ("" = run-level) and window.
            missing = [k for k in ("kind", "origin", "window", "start_step") if k not in inc]
            if missing:
                failures.append(f"{rid}: incident without {missing}")
            elif inc["origin"] != (inc.get("component") or "") or inc["window"][0] != inc["start_step"]:
                failures.append(f"{rid}: origin/window disagree with component/start_step")
        if label.get("kind") == "nan_loss_recover":
            bad = sorted({l["step"] for l in lines if l.get("type") == "point" and isinstance(l["value"], str)})
            s0 = label["incidents"][0]["start_step"]
            if bad != [s0]:
                failures.append(f"{rid}: non-finite values at steps {bad}, expected only {s0}")
        if not label["incidents"]:
            print(head + f", non-finite {nonfinite}")
            # benign_amp: a loss scaler's overflow steps have non-finite grad_norm by design, nowhere else.
            allowed = {st for ev in label["benign_events"] if ev["kind"] == "amp_overflow" for st in range(ev["start_step"], ev["end_step"] + 1)}
            bad = sorted({l["step"] for l in lines if l.get("type") == "point" and isinstance(l["value"], str)
                          and not (l["step"] in allowed and l["metric"] == "grad_norm")})
            if bad:
                failures.append(f"{rid}: benign run with non-finite values at steps {bad[:10]}")
            if label.get("kind") == "benign_amp":
                seen = sorted({l["step"] for l in lines if l.get("type") == "point" and isinstance(l["value"], str)})
                if seen != sorted(allowed):
                    failures.append(f"{rid}: non-finite grad_norm at {seen}, labelled overflow steps {sorted(allowed)}")
            runs_lines = [l for l in lines if l.get("type") == "run"]
            for ev in label["benign_events"]:
                if ev["kind"] == "batch_change":
                    # the second run line comes right before the change step's lines, with the doubled batch
                    idx = [i for i, l in enumerate(lines) if l.get("type") == "run"]
                    nxt = next((l for l in lines[idx[-1] + 1:] if l.get("type") == "point"), None)
                    if len(runs_lines) != 2 or nxt is None or nxt["step"] != ev["start_step"] or runs_lines[1]["config"]["batch_size"] != 2 * runs_lines[0]["config"]["batch_size"]:
                        failures.append(f"{rid}: batch change run line does not match its label")
                    else:
                        print(f"    batch change: second run line before step {nxt['step']}, batch {runs_lines[0]['config']['batch_size']} -> {runs_lines[1]['config']['batch_size']}")
            if len(runs_lines) > 1 and not any(ev["kind"] == "batch_change" for ev in label["benign_events"]):
                failures.append(f"{rid}: {len(runs_lines)} run lines")
            for ev in label["benign_events"]:
                if ev["kind"] == "restart":
                    a, b = ev["replayed_steps"]
                    loss_all = [(l["step"], value(l["value"])) for l in lines if l.get("type") == "point" and l["metric"] == "loss"]
                    seen = defaultdict(list)
                    for st, v in loss_all:
                        seen[st].append(v)
                    twice = sorted(st for st, vs in seen.items() if len(vs) > 1)
                    same = all(len(set(seen[st])) == 1 for st in twice)
                    phases = [(l["step"], l["phase"]) for l in lines if l.get("type") == "phase"]
                    print(f"    restart: replayed {twice[0]}-{twice[-1]} ({len(twice)} steps, identical loss: {same}); label {a}-{b}; "
                          f"restart phase at {[s for s, p in phases if p == 'restart']}")
                    if (twice[0], twice[-1]) != (a, b) or not same:
                        failures.append(f"{rid}: replay does not match its label")
            continue
        print(head + f", non-finite {nonfinite}")
        if label.get("kind") == "telemetry_stop":
            inc = label["incidents"][0]
            comp_steps = {l["step"] for l in lines if l.get("type") == "point" and l.get("component") == inc["component"]}
            run_steps = {l["step"] for l in lines if l.get("type") == "point" and "component" not in l}
            if max(comp_steps) != inc["start_step"] - 1 or max(run_steps) != last_step:
                failures.append(f"{rid}: {inc['component']} points end at {max(comp_steps)}, expected {inc['start_step'] - 1}")
        if label.get("kind") == "amp_skip":
            inc = label["incidents"][0]
            bad = sorted({l["step"] for l in lines if l.get("type") == "point" and isinstance(l["value"], str)})
            if not bad or bad[0] != inc["start_step"] or len(bad) != last_step - inc["start_step"] + 1:
                failures.append(f"{rid}: non-finite steps {bad[:3]}..{bad[-3:]} do not match the label")
        for inc in label["incidents"]:
            s, e, comp = inc["start_step"], inc["end_step"], inc["component"] or None
            ee = e if e is not None else min(last_step, s + 30)
            print(f"    {inc['kind']} start {s} end {e} component {comp or '(run)'}")
            for metric in inc["metrics"]:
                ser = series(lines, metric, comp if metric not in ("loss", "lr", "val_loss", "throughput", "step_time") else None)
                if not ser:
                    ser = series(lines, metric, None)
                before = window(ser, s - 50, s - 1)
                during = window(ser, s, ee)
                after = window(ser, s, last_step)
                print(f"      {metric:13s}@{comp if metric in ('grad_norm', 'weight_norm', 'update_ratio', 'act_norm', 'dead_fraction') and comp else 'run':14s} "
                      f"before {mean(before):10.4g}  [{s}..{ee}] {mean(during):10.4g}  first {during[0] if during else math.nan:10.4g}  "
                      f"to end {mean(after):10.4g}  last {after[-1] if after else math.nan:10.4g}  non-finite {sum(1 for v in after if not math.isfinite(v))}")
            if inc["component"]:
                # Which component's series moves first, in its own scale (|log ratio| to the pre-fault mean > log 3, or non-finite)?
                firsts = {}
                for metric in ("grad_norm", "weight_norm", "update_ratio", "act_norm", "dead_fraction"):
                    comps = {l.get("component") for l in lines if l.get("type") == "point" and l["metric"] == metric and l.get("component")}
                    for c in comps:
                        ser = series(lines, metric, c)
                        base = mean(window(ser, s - 50, s - 1))
                        for st in range(s, last_step + 1):
                            v = ser.get(st)
                            if v is None:
                                continue
                            moved = (not math.isfinite(v)) or (
                                abs(v - base) > 0.5 if metric == "dead_fraction" else
                                (base > 0 and (v <= 0 or abs(math.log(max(v, 1e-30) / base)) > math.log(3))))
                            if moved:
                                firsts[(metric, c)] = st
                                break
                order = sorted(firsts.items(), key=lambda kv: kv[1])[:6]
                print("      first to move (x3 / non-finite / dead 0.5): " + ", ".join(f"{m}@{c} {st}" for (m, c), st in order))
    print(f"total {total / 1048576:.2f} MiB in {len(labels['runs'])} files")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
