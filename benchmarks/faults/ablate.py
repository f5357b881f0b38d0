#!/usr/bin/env python
"""Each change of issue 20, taken back one at a time: the false pages it removed and the faults it did not lose.

    .venv/bin/python benchmarks/faults/ablate.py --full /tmp/full.json              # held-out half, every change
    .venv/bin/python benchmarks/faults/ablate.py --full /tmp/full.json --only noise  # one of them
    .venv/bin/python benchmarks/faults/ablate.py --full /tmp/full.json --split tune

`--full` is a `run.py --json` output of the whole starter pack as it ships (made with `run.py --json FILE`, or
here when FILE does not exist yet). For each change below, a rules file (`project: faults`) puts the pack's
rules back the way they were without that change — the engine still runs the new code, but a change that is a
rule or a param is undone by the rule's own fields (`adapt_after` restores the old absorption, `noise_z: 0`
the old fixed shares, `count: 1` the per-occurrence non-finite gradients, a new rule disabled) — and
`run.py --split SPLIT --rules FILE --json` replays the split with it. `compare.py` then reads the variant as
"before" and the pack as "after": what the change removed (false pages the variant has and the pack has not),
what it added, the faults it gained and lost, the lasting faults it keeps open. A change that removed false
pages by raising a threshold shows here as faults lost.
"""
from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

import compare  # noqa: E402

OWNER = "Bench On-call <oncall@example.org>"
NEW_RULES = ["update-surge", "vanishing-gradient", "lr-collapse", "loss-under-trend", "component-silent", "reference-gap"]


def _band_rules(rules):
    return [r for r in rules if r["kind"] == "band"]


def _absorbing(rules):
    for rule in _band_rules(rules):
        rule["params"]["adapt_after"] = 2 * rule["params"].get("window", 100)  # the old default: 2 × window


def _no_level(rules):
    for rule in _band_rules(rules):
        for key in ("level_points", "level_min", "level_width"):
            rule["params"].pop(key, None)


def _no_drift(rules):
    for rule in _band_rules(rules):
        rule["params"].pop("drift_ratio", None)


def _per_occurrence(rules):
    for rule in rules:
        if rule["name"] == "nonfinite-weights":
            rule["enabled"] = False  # the old nonfinite-gradients covered weights and activations too
        if rule["name"] == "nonfinite-gradients":
            rule["params"] = {}
            rule["scope"] = {"metrics": ["grad_norm", "update_ratio", "weight_norm", "act_norm", "dead_fraction"],
                             "component": "*"}


def _fixed_shares(rules):
    for rule in rules:
        if rule["name"] == "validation-divergence":
            rule["params"]["noise_z"] = 0


def _without_new_rules(rules):
    for rule in rules:
        if rule["name"] in NEW_RULES:
            rule["enabled"] = False


# name: (what the change is, how the pack looked without it)
CHANGES = {
    "frozen": ("excursions judged against the band they left (no absorption after 2 windows)", _absorbing),
    "level": ("loss-spike judges the level (median of 20 points) too", _no_level),
    "drift": ("bands anchored to the level a window earlier (drift_ratio)", _no_drift),
    "rate": ("non-finite gradients judged by rate (3 of 20, outside warmup)", _per_occurrence),
    "noise": ("validation divergence judged against the evaluation's own noise", _fixed_shares),
    "rules": ("the new rules: update-surge, vanishing-gradient, lr-collapse, loss-under-trend, component-silent, "
              "reference-gap", _without_new_rules),
}


def pack_rules() -> list[dict]:
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    import django

    django.setup()
    from alerts.starter import STARTER_RULES

    rules = []
    for spec in STARTER_RULES:
        rule = {k: copy.deepcopy(v) for k, v in spec.items() if k != "runbook"}
        rule.setdefault("params", {})
        rule.update(project="faults", owner=OWNER, diagnostic_url=f"https://runbooks.example/{spec['name']}", enabled=True)
        rules.append(rule)
    return rules


def replay(split: str, out: Path, rules_file: Path | None = None) -> None:
    command = [sys.executable, str(HERE / "run.py"), "--split", split, "--json", str(out)]
    if rules_file is not None:
        command += ["--rules", str(rules_file)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"run.py failed ({' '.join(command)}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", type=Path, required=True, help="run.py --json of the pack as it ships (made if missing)")
    p.add_argument("--split", default="heldout", choices=("tune", "heldout", "all"))
    p.add_argument("--only", action="append", choices=sorted(CHANGES), help="these changes only (repeatable)")
    p.add_argument("--keep", type=Path, help="keep each variant's run.py JSON in this folder")
    args = p.parse_args(argv)
    if not args.full.exists():
        replay(args.split, args.full)
    full = compare.load(args.full)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="wl-ablate-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"Each change of issue 20 taken back alone, on the {args.split} half ({args.full} is the pack as it ships)\n")
    print("| change | false pages it removed | it added | faults it gained | faults it lost | lasting faults it keeps open |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in args.only or list(CHANGES):
        words, undo = CHANGES[name]
        rules = pack_rules()
        undo(rules)
        rules_file = folder / f"without-{name}.yaml"
        rules_file.write_text(yaml.safe_dump({"rules": rules}, sort_keys=False))
        out = folder / f"without-{name}.json"
        replay(args.split, out, rules_file)
        result = compare.compare(compare.load(out), full, split=args.split)
        t = result["totals"]
        print(f"| {words} | {t['false_removed']} | {t['false_added']} | {t['faults_gained']} | {t['faults_lost']} | "
              f"{t['lasting_now_open']} |", flush=True)
        for run in result["runs"]:
            lines = compare.format_run(run)
            if len(lines) > 1:
                print("    " + "\n    ".join(lines), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
