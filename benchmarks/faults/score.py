"""Scoring of detector alerts against labelled incidents: pure functions, no I/O, no Django.

Inputs
------
A *run* is a dict::

    {"run": "<run id>", "split": "tune" | "heldout", "last_step": <highest step in the file>,
     "incidents": [{"kind": str, "start_step": int, "end_step": int | None,
                    "component": str ("" = run-level), "metrics": [...]}, ...]}

A run with no incidents is benign. An *alert* is a dict as `GET /api/v1/alerts/?run=` answers
(or as the baseline produces): ``id``, ``component`` (None or "" = the whole run), ``step``,
``last_step`` and optionally ``fired_step``; ``fired_step`` is used when present, else ``step``.

Definitions
-----------
- An incident's window is [start_step, end_step + 50] when end_step is given, else
  [start_step, the run's last step].
- An alert is *true* for an incident when its fired step lies in the incident's window; an alert
  true for no incident of its run (every alert on a benign run) is *false*.
- recall of a kind = incidents of that kind with >= 1 true alert / incidents of that kind.
- false-alarm share = false alerts / all alerts.
- detection delay of a detected incident = min over its true alerts of (fired step - start_step);
  median (the usual one: mean of the two middle values for an even count) and p90 (nearest rank).
- localization = over detected incidents whose label names a component, the share whose
  earliest-firing true alert (smallest fired step, ties by smallest id) names exactly that component.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict

END_MARGIN = 50  # steps after a labelled end that still count as the incident

TARGETS = {
    "recall": (">=", 0.95),
    "false_alarm_share": ("<=", 0.05),
    "benign_runs_alerted": ("<=", 0),
    "median_delay": ("<=", 10),
    "localization": (">=", 0.9),
}


def fired_step(alert: dict) -> int:
    value = alert.get("fired_step")
    return alert["step"] if value is None else value


def alert_component(alert: dict) -> str:
    return alert.get("component") or ""


def incident_window(incident: dict, last_step: int) -> tuple[int, int]:
    start = incident["start_step"]
    end = incident.get("end_step")
    return (start, end + END_MARGIN) if end is not None else (start, max(start, last_step))


def nearest_rank(values, p: float):
    """The p-th percentile (0 < p <= 100) by nearest rank: the smallest value with at least p% of values <= it."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def match_run(run: dict, alerts: list[dict]) -> dict:
    """Per-run matching: which alerts are true, and for each incident its true alerts (earliest first)."""
    windows = [incident_window(inc, run["last_step"]) for inc in run["incidents"]]
    per_incident = [[] for _ in run["incidents"]]
    true_ids, false_alerts = set(), []
    for alert in alerts:
        fs = fired_step(alert)
        hit = False
        for i, (lo, hi) in enumerate(windows):
            if lo <= fs <= hi:
                per_incident[i].append(alert)
                hit = True
        if hit:
            true_ids.add(alert["id"])
        else:
            false_alerts.append(alert)
    incidents = []
    for inc, window, hits in zip(run["incidents"], windows, per_incident):
        hits.sort(key=lambda a: (fired_step(a), a["id"]))
        first = hits[0] if hits else None
        incidents.append({
            "kind": inc["kind"],
            "start_step": inc["start_step"],
            "end_step": inc.get("end_step"),
            "component": inc.get("component") or "",
            "window": list(window),
            "detected": first is not None,
            "delay": (fired_step(first) - inc["start_step"]) if first else None,
            "first_alert": first["id"] if first else None,
            "first_component": alert_component(first) if first else None,
            "localized": (alert_component(first) == (inc.get("component") or "")) if first else None,
        })
    return {
        "run": run["run"],
        "split": run.get("split"),
        "benign": not run["incidents"],
        "alerts": len(alerts),
        "true_alerts": len(true_ids),
        "false_alerts": len(false_alerts),
        "first_fired_step": min((fired_step(a) for a in alerts), default=None),
        "incidents": incidents,
    }


def _ratio(num: int, den: int):
    return None if den == 0 else num / den


def score(runs: list[dict], alerts_by_run: dict[str, list[dict]]) -> dict:
    """All figures over the given runs (alerts of runs not listed are ignored)."""
    matched = [match_run(run, alerts_by_run.get(run["run"], [])) for run in runs]
    by_kind = defaultdict(lambda: [0, 0])  # kind -> [detected, total]
    delays, loc_hits, loc_total, labelled_components = [], 0, 0, 0
    for m in matched:
        for inc in m["incidents"]:
            by_kind[inc["kind"]][1] += 1
            if inc["component"]:
                labelled_components += 1
            if inc["detected"]:
                by_kind[inc["kind"]][0] += 1
                delays.append(inc["delay"])
                if inc["component"]:
                    loc_total += 1
                    loc_hits += bool(inc["localized"])
    detected = sum(d for d, _ in by_kind.values())
    incidents = sum(t for _, t in by_kind.values())
    total_alerts = sum(m["alerts"] for m in matched)
    false_alerts = sum(m["false_alerts"] for m in matched)
    benign = [m for m in matched if m["benign"]]
    benign_alerted = sorted(m["run"] for m in benign if m["alerts"])
    return {
        "runs": len(matched),
        "incidents": incidents,
        "detected": detected,
        "recall": _ratio(detected, incidents),
        "recall_by_kind": {kind: {"detected": d, "incidents": t, "recall": _ratio(d, t)}
                           for kind, (d, t) in sorted(by_kind.items())},
        "alerts": total_alerts,
        "false_alerts": false_alerts,
        "false_alarm_share": _ratio(false_alerts, total_alerts),
        "benign_runs": len(benign),
        "benign_runs_alerted": len(benign_alerted),
        "benign_runs_alerted_names": benign_alerted,
        "median_delay": statistics.median(delays) if delays else None,
        "p90_delay": nearest_rank(delays, 90),
        "delays": sorted(delays),
        "localization": _ratio(loc_hits, loc_total),
        "localized": loc_hits,
        "localization_incidents": loc_total,
        "incidents_with_component": labelled_components,
        "per_run": matched,
    }


def meets(name: str, value) -> bool | None:
    if value is None:
        return None
    op, target = TARGETS[name]
    return value >= target if op == ">=" else value <= target


def alerted_within(alerts: list[dict], start_step: int, steps: int) -> int | None:
    """The earliest fired step in [start_step, start_step + steps], or None."""
    hits = [fired_step(a) for a in alerts if start_step <= fired_step(a) <= start_step + steps]
    return min(hits) if hits else None


# --------------------------------------------------------------------------------------
# Text output
# --------------------------------------------------------------------------------------

def _fmt(value, digits=3):
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.{digits}f}"
    return f"{int(value)}" if isinstance(value, float) else str(value)


def _ratio_text(value):
    return "–" if value is None else f"{value:.3f}"


def _verdict(name, value):
    ok = meets(name, value)
    return "n/a" if ok is None else ("ok" if ok else "MISSED")


def format_table(figures: dict, title: str) -> str:
    f = figures
    lines = [f"### {title}: {f['runs']} runs, {f['incidents']} incidents, {f['benign_runs']} benign runs, {f['alerts']} alerts", ""]
    lines.append("| figure | value | target | |")
    lines.append("| --- | ---: | ---: | --- |")
    lines.append(f"| recall | {_ratio_text(f['recall'])} ({f['detected']}/{f['incidents']}) | ≥ 0.95 | {_verdict('recall', f['recall'])} |")
    for kind, k in f["recall_by_kind"].items():
        lines.append(f"| · recall {kind} | {_ratio_text(k['recall'])} ({k['detected']}/{k['incidents']}) | ≥ 0.95 | "
                     f"{_verdict('recall', k['recall'])} |")
    lines.append(f"| false-alarm share | {_ratio_text(f['false_alarm_share'])} ({f['false_alerts']}/{f['alerts']}) | ≤ 0.05 | "
                 f"{_verdict('false_alarm_share', f['false_alarm_share'])} |")
    names = ", ".join(f["benign_runs_alerted_names"][:8]) + (" …" if len(f["benign_runs_alerted_names"]) > 8 else "")
    lines.append(f"| benign runs with any alert | {f['benign_runs_alerted']}/{f['benign_runs']}"
                 f"{' (' + names + ')' if names else ''} | 0 | "
                 f"{_verdict('benign_runs_alerted', f['benign_runs_alerted'] if f['benign_runs'] else None)} |")
    lines.append(f"| median delay (steps) | {_fmt(f['median_delay'], 1)} | ≤ 10 | {_verdict('median_delay', f['median_delay'])} |")
    lines.append(f"| p90 delay (steps, nearest rank) | {_fmt(f['p90_delay'])} | | |")
    lines.append(f"| localization | {_ratio_text(f['localization'])} ({f['localized']}/{f['localization_incidents']} detected; "
                 f"{f['incidents_with_component']} labelled with a component) | ≥ 0.9 | "
                 f"{_verdict('localization', f['localization'])} |")
    return "\n".join(lines)


def format_run_line(m: dict) -> str:
    parts = [f"{m['run']} [{m['split']}{', benign' if m['benign'] else ''}]: alerts {m['alerts']} "
             f"(true {m['true_alerts']}, false {m['false_alerts']}), first fired step {_fmt(m['first_fired_step'])}"]
    for inc in m["incidents"]:
        where = f"@{inc['component']}" if inc["component"] else ""
        if inc["detected"]:
            loc = "" if not inc["component"] else (" localized" if inc["localized"] else f" named {inc['first_component'] or 'run'}")
            parts.append(f"{inc['kind']}{where} {inc['start_step']}: delay {inc['delay']}{loc}")
        else:
            parts.append(f"{inc['kind']}{where} {inc['start_step']}: missed")
    return "; ".join(parts)
