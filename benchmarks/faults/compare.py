#!/usr/bin/env python
"""What a change did, fault by fault: two `run.py --json` outputs compared at the incident level.

    .venv/bin/python benchmarks/faults/compare.py BEFORE.json AFTER.json                  # held-out half
    .venv/bin/python benchmarks/faults/compare.py BEFORE.json AFTER.json --split all
    .venv/bin/python benchmarks/faults/compare.py BEFORE.json AFTER.json --detector baseline --json diff.json

Issue 20: nothing gets quieter by raising thresholds; for each change, show the false pages it
removed and the faults it did not lose, on the held-out half. Both files are read as they are
(pure Python, no Django, no console): the per-run incident matching `score.score_incidents` wrote
under `console_incidents.<split>.per_run` (or `baseline_incidents`).

Per run (only runs where something changed are printed):

- false pages removed / added: a run's false incidents (`per_run[].false`: step, origin rule,
  metric, component, state) are paired across the two files when they have the same origin (rule,
  metric, component) and their steps are at most --tolerance steps apart (default 10), nearest
  first; an unpaired one before was removed, an unpaired one after was added. A file written before
  the list existed has only counts: then the difference of the counts is reported, marked "counts".
- per labelled fault (kind, start step, component): lost (detected before, missed after), gained,
  delay changed, origin changed (the component or metric the first true incident names), and for a
  fault without an end, open at the end changed (`open_at_end`).

Then a summary line (the totals) and the headline figures of the split before → after. Exit status
0; 2 when a file cannot be read or lacks the split.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

FIGURES = (  # key, label, how it is written
    ("recall", "recall", "ratio"),
    ("false_alarm_share", "false-page share", "ratio"),
    ("benign_runs_alerted", "benign runs paged", "count"),
    ("median_delay", "median delay", "steps"),
    ("localization", "origin = faulty component", "ratio"),
    ("lasting_open_at_end", "lasting faults open at the end", "ratio"),
)


class Unreadable(Exception):
    pass


def load(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise Unreadable(f"{path}: {exc}") from None


def per_run(document: dict, split: str, detector: str = "console") -> dict[str, dict]:
    """The incident-level per-run matching of one split, by run id."""
    key = f"{detector}_incidents"
    levels = document.get(key)
    if not isinstance(levels, dict):
        raise Unreadable(f"no `{key}` in the file: not a run.py --json output?")
    if split not in levels:
        raise Unreadable(f"split {split!r} is not in `{key}` (it has: {', '.join(levels) or 'nothing'})")
    return {m["run"]: m for m in levels[split]["per_run"]}


def figures(document: dict, split: str, detector: str = "console") -> dict:
    return (document.get(f"{detector}_incidents") or {}).get(split) or {}


def fault_key(fault: dict) -> tuple:
    return (fault["kind"], fault["start_step"], fault.get("component") or "")


def fault_name(fault: dict) -> str:
    where = f"@{fault['component']}" if fault.get("component") else ""
    return f"{fault['kind']}{where} at {fault['start_step']:,}"


def page_name(page: dict) -> str:
    where = f"@{page['component']}" if page.get("component") else ""
    return f"{page.get('rule') or '?'} ({page.get('metric') or 'event'}{where}) at {page['step']:,}, {page.get('state')}"


def pair_false_pages(before: list[dict], after: list[dict], tolerance: int) -> tuple[list, list, list]:
    """(kept pairs, removed, added): same origin (rule, metric, component), steps within `tolerance`, nearest first."""
    candidates = []
    for i, b in enumerate(before):
        for j, a in enumerate(after):
            same = (b.get("rule"), b.get("metric"), b.get("component") or "") == (a.get("rule"), a.get("metric"), a.get("component") or "")
            gap = abs(b["step"] - a["step"])
            if same and gap <= tolerance:
                candidates.append((gap, b["step"], i, j))
    used_b, used_a, kept = set(), set(), []
    for _, _, i, j in sorted(candidates):
        if i not in used_b and j not in used_a:
            used_b.add(i)
            used_a.add(j)
            kept.append((before[i], after[j]))
    removed = [b for i, b in enumerate(before) if i not in used_b]
    added = [a for j, a in enumerate(after) if j not in used_a]
    return kept, removed, added


def compare_run(before: dict, after: dict, tolerance: int) -> dict:
    """What changed in one run (both per-run entries of `score.match_run_incidents`)."""
    out = {"run": after["run"], "split": after.get("split"), "benign": after.get("benign"),
           "false_before": before["false_incidents"], "false_after": after["false_incidents"]}
    if "false" in before and "false" in after:
        kept, removed, added = pair_false_pages(before["false"], after["false"], tolerance)
        out.update(counts_only=False, false_removed=removed, false_added=added,
                   false_moved=[(b, a) for b, a in kept if b["step"] != a["step"]])
    else:
        diff = after["false_incidents"] - before["false_incidents"]
        out.update(counts_only=True, false_removed=max(0, -diff), false_added=max(0, diff), false_moved=[])
    faults_before = {fault_key(f): f for f in before["faults"]}
    faults_after = {fault_key(f): f for f in after["faults"]}
    lost, gained, delays, origins, lasting, unmatched = [], [], [], [], [], []
    for key in sorted(set(faults_before) | set(faults_after), key=lambda k: (k[1], k[0], k[2])):
        b, a = faults_before.get(key), faults_after.get(key)
        if b is None or a is None:
            unmatched.append({"fault": a or b, "only_in": "after" if b is None else "before"})
            continue
        if b["detected"] and not a["detected"]:
            lost.append({"fault": a, "delay_before": b["delay"]})
        elif a["detected"] and not b["detected"]:
            gained.append({"fault": a, "delay_after": a["delay"]})
        elif a["detected"]:
            if a["delay"] != b["delay"]:
                delays.append({"fault": a, "before": b["delay"], "after": a["delay"]})
            named_b = (b.get("origin_component") or "", b.get("origin_metric"))
            named_a = (a.get("origin_component") or "", a.get("origin_metric"))
            if named_a != named_b:
                origins.append({"fault": a, "before": named_b, "after": named_a,
                                "localized_before": b.get("localized"), "localized_after": a.get("localized")})
        if a.get("end_step") is None and b.get("open_at_end") != a.get("open_at_end"):
            lasting.append({"fault": a, "before": b.get("open_at_end"), "after": a.get("open_at_end")})
    out.update(lost=lost, gained=gained, delays=delays, origins=origins, lasting=lasting, unmatched_faults=unmatched)
    out["changed"] = bool(_count(out["false_removed"]) or _count(out["false_added"]) or out["false_moved"] or lost or gained
                          or delays or origins or lasting or unmatched)
    return out


def _count(value) -> int:
    return value if isinstance(value, int) else len(value)


def compare(before_doc: dict, after_doc: dict, split: str = "heldout", detector: str = "console", tolerance: int = 10) -> dict:
    """Every run's changes (`compare_run`), the runs only one file has, the totals and the headline figures."""
    before, after = per_run(before_doc, split, detector), per_run(after_doc, split, detector)
    runs = [compare_run(before[r], after[r], tolerance) for r in sorted(set(before) & set(after))]
    totals = {
        "runs": len(runs),
        "false_before": sum(r["false_before"] for r in runs),
        "false_after": sum(r["false_after"] for r in runs),
        "false_removed": sum(_count(r["false_removed"]) for r in runs),
        "false_added": sum(_count(r["false_added"]) for r in runs),
        "faults": sum(len(after[r["run"]]["faults"]) for r in runs),
        "faults_lost": sum(len(r["lost"]) for r in runs),
        "faults_gained": sum(len(r["gained"]) for r in runs),
        "delays_changed": sum(len(r["delays"]) for r in runs),
        "delays_shorter": sum(1 for r in runs for d in r["delays"] if d["after"] < d["before"]),
        "delays_longer": sum(1 for r in runs for d in r["delays"] if d["after"] > d["before"]),
        "origins_changed": sum(len(r["origins"]) for r in runs),
        "lasting_now_open": sum(1 for r in runs for c in r["lasting"] if c["after"] and not c["before"]),
        "lasting_no_longer_open": sum(1 for r in runs for c in r["lasting"] if c["before"] and not c["after"]),
        "counts_only": any(r["counts_only"] for r in runs),
    }
    fig_b, fig_a = figures(before_doc, split, detector), figures(after_doc, split, detector)
    return {
        "split": split, "detector": detector, "tolerance": tolerance,
        "code": {"before": before_doc.get("code"), "after": after_doc.get("code")},
        "runs": runs,
        "only_before": sorted(set(before) - set(after)),
        "only_after": sorted(set(after) - set(before)),
        "totals": totals,
        "figures": {key: {"before": fig_b.get(key), "after": fig_a.get(key)} for key, _, _ in FIGURES},
        "lasting": {"before": [fig_b.get("lasting_open"), fig_b.get("lasting_detected")],
                    "after": [fig_a.get("lasting_open"), fig_a.get("lasting_detected")]},
    }


# --------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------

def _value(value, how="count"):
    if value is None:
        return "–"
    if how == "ratio":
        return f"{value:.3f}"
    if isinstance(value, float):
        return f"{value:.1f}" if not value.is_integer() else str(int(value))
    return str(value)


def _pages(value) -> str:
    if isinstance(value, int):
        return f"{value} (counts)"
    return f"{len(value)}" + (" (" + "; ".join(page_name(p) for p in value) + ")" if value else "")


def _open(value) -> str:
    return {True: "open", False: "resolved", None: "not detected"}[value]


def format_run(r: dict) -> list[str]:
    lines = [f"{r['run']} [{r['split']}{', benign' if r['benign'] else ''}]: false pages {r['false_before']} → {r['false_after']}"]
    if _count(r["false_removed"]):
        lines.append(f"  false pages removed: {_pages(r['false_removed'])}")
    if _count(r["false_added"]):
        lines.append(f"  false pages added: {_pages(r['false_added'])}")
    for b, a in r["false_moved"]:
        lines.append(f"  false page moved: {page_name(b)} → step {a['step']:,}, {a.get('state')}")
    for c in r["lost"]:
        lines.append(f"  fault LOST: {fault_name(c['fault'])} (delay {c['delay_before']} before, missed after)")
    for c in r["gained"]:
        lines.append(f"  fault gained: {fault_name(c['fault'])} (missed before, delay {c['delay_after']} after)")
    for c in r["delays"]:
        lines.append(f"  delay: {fault_name(c['fault'])}: {c['before']} → {c['after']} steps")
    for c in r["origins"]:
        (cb, mb), (ca, ma) = c["before"], c["after"]
        lines.append(f"  origin: {fault_name(c['fault'])}: {mb}@{cb or 'run'} → {ma}@{ca or 'run'}"
                     + (f" (localized {c['localized_before']} → {c['localized_after']})" if c["fault"].get("component") else ""))
    for c in r["lasting"]:
        lines.append(f"  open at the end: {fault_name(c['fault'])}: {_open(c['before'])} → {_open(c['after'])}")
    for c in r["unmatched_faults"]:
        lines.append(f"  fault only {c['only_in']}: {fault_name(c['fault'])}")
    return lines


def summary_line(result: dict) -> str:
    t = result["totals"]
    lb, la = result["lasting"]["before"], result["lasting"]["after"]
    return (f"summary ({result['split']}, {t['runs']} runs, {t['faults']} faults): false pages {t['false_before']} → {t['false_after']} "
            f"(removed {t['false_removed']}, added {t['false_added']}{', counts only' if t['counts_only'] else ''}); "
            f"faults lost {t['faults_lost']}, gained {t['faults_gained']}; delays changed {t['delays_changed']} "
            f"({t['delays_shorter']} shorter, {t['delays_longer']} longer); origins changed {t['origins_changed']}; "
            f"lasting faults open at the end {_value(lb[0])}/{_value(lb[1])} → {_value(la[0])}/{_value(la[1])} "
            f"({t['lasting_now_open']} now open, {t['lasting_no_longer_open']} no longer)")


def format_comparison(result: dict, before_name: str = "before", after_name: str = "after") -> str:
    code = result["code"]
    lines = [f"## Incident-level changes, {result['split']} ({result['detector']}): {before_name} ({code['before'] or '?'}) → "
             f"{after_name} ({code['after'] or '?'})", ""]
    changed = [r for r in result["runs"] if r["changed"]]
    for r in changed:
        lines.extend(format_run(r))
    lines.append(f"{len(result['runs']) - len(changed)} of {len(result['runs'])} runs unchanged at the incident level")
    if result["only_before"]:
        lines.append(f"runs only before: {', '.join(result['only_before'])}")
    if result["only_after"]:
        lines.append(f"runs only after: {', '.join(result['only_after'])}")
    lines.append("")
    lines.append(summary_line(result))
    lines.append("figures: " + "; ".join(
        f"{label} {_value(result['figures'][key]['before'], how)} → {_value(result['figures'][key]['after'], how)}"
        for key, label, how in FIGURES))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", type=Path, help="run.py --json output before the change")
    p.add_argument("after", type=Path, help="run.py --json output after the change")
    p.add_argument("--split", choices=("tune", "heldout", "all"), default="heldout", help="which half (default heldout)")
    p.add_argument("--detector", choices=("console", "baseline"), default="console")
    p.add_argument("--tolerance", type=int, default=10, help="steps apart at which two false pages of one origin are the same (default 10)")
    p.add_argument("--json", type=Path, metavar="OUT", help="also write the comparison to this JSON file")
    args = p.parse_args(argv)
    try:
        result = compare(load(args.before), load(args.after), args.split, args.detector, args.tolerance)
    except Unreadable as exc:
        print(f"compare.py: {exc}", file=sys.stderr)
        return 2
    print(format_comparison(result, args.before.name, args.after.name))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
