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
- a *lasting* incident is one whose label has no end_step (the run never recovered). Lasting
  incidents still open at the end = over detected lasting incidents, the share with >= 1 true alert
  still open as read after the run's last batch: its ``state`` is firing, acknowledged or muted
  (`OPEN_ALERT_STATES`; an alert without a state counts as not open). Target: all of them (1.0).

Incident level
--------------
A *console incident* is a dict as `GET /api/v1/incidents/?run=` answers (or as `group_alerts`, the
client-side stand-in, builds): ``id``, ``first_step``, ``origin`` ({"alert", "rule", "metric",
"component", "step"}), ``alerts`` (alert ids), ``blast_radius``, ... To keep one yardstick with the
alert level, an incident's step is the smallest fired step of its member alerts found in the run's
alert list, else its ``first_step``. A labelled fault is the *labelled incident* of the sections
above (the word "fault" is used for it here, to keep the two apart).

- An incident is *true* for a fault when its step lies in the fault's window; else *false*.
- recall = faults with >= 1 true incident / faults; false-alarm share = false incidents / incidents;
  benign runs alerted = benign runs with >= 1 incident.
- delay of a detected fault = min over its true incidents of (incident step - start_step).
- localization = over detected faults whose label names a component, the share whose earliest true
  incident (smallest step, ties by id as text) has an origin naming exactly that component.
- alerts per incident: median and max of len(alerts) over every incident of the runs scored;
  incidents per detected fault: median and max of its true incidents.
- lasting faults still open at the end = over detected faults whose label has no end_step, the
  share with >= 1 true incident (any of them, not only the first) whose ``state``, as read after the
  run's last batch, is not resolved: firing, acknowledged, muted or needs_review
  (`OPEN_INCIDENT_STATES`, the states `GET /api/v1/incidents/` answers besides resolved). Target:
  all of them (1.0): a fault that lasts must not leave the inbox while it lasts.
- a run's false incidents are listed (``false``: id, step, origin rule, metric, component, state),
  so that two replays can be compared page by page (`compare.py`).

Real runs
---------
`real_runs_check` judges the real public runs one by one: for each labelled fault, the earliest
fired step of an alert in [start_step, start_step + `REAL_WITHIN`] (alerted within 20 steps, and
the delay), and whether a true incident of it is open (`OPEN_INCIDENT_STATES`, needs review
included) after the run's last batch; for each run without a label, its incidents (a page each).
"""
from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict

END_MARGIN = 50  # steps after a labelled end that still count as the incident

TARGETS = {
    "recall": (">=", 0.95),
    "false_alarm_share": ("<=", 0.05),
    "benign_runs_alerted": ("<=", 0),
    "median_delay": ("<=", 10),
    "localization": (">=", 0.9),
    "median_alerts_per_incident": ("<=", 2),
    "lasting_open_at_end": (">=", 1.0),
}

# States read after a run's last batch that still hold a fault in front of a person.
OPEN_ALERT_STATES = frozenset({"firing", "acknowledged", "muted"})
OPEN_INCIDENT_STATES = frozenset({"firing", "acknowledged", "muted", "needs_review"})
REAL_WITHIN = 20  # steps within which a real run's labelled fault must be alerted
REAL_PAGES_SHOWN = 5  # a benign real run's pages listed by name in the text (all of them in the JSON)

# The client-side stand-in for incidents (used while the console has no incidents endpoint).
STANDIN_GAP = 5  # alerts of a run whose fired steps are within this many steps of the previous one join its incident
# Causal order for the origin: a component's weights move first, then what it outputs, then the
# gradients that flow back through it, then the loss; everything else (throughput, lr, ...) last.
SIGNAL_CLASSES = {
    "weight_norm": 0, "update_ratio": 0, "weight_jump": 0,
    "act_norm": 1, "dead_fraction": 1,
    "grad_norm": 2,
    "loss": 3, "val_loss": 3,
}
OTHER_SIGNAL = 4
RESPONSE_ORDER = ["observe", "notify", "review", "stop", "rewind"]
STANDIN_STATE_ORDER = ("firing", "acknowledged", "muted", "resolved")


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
            "lasting": inc.get("end_step") is None,
            "open_at_end": (any(alert_open(a) for a in hits) if first else None) if inc.get("end_step") is None else None,
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


def alert_open(alert: dict) -> bool:
    return alert.get("state") in OPEN_ALERT_STATES


def incident_open(incident: dict) -> bool:
    return incident.get("state") in OPEN_INCIDENT_STATES


def _lasting_figures(faults) -> dict:
    """Lasting faults (no end_step), those detected, and those of them with something still open at the end."""
    lasting = [f for f in faults if f["end_step"] is None]
    detected = [f for f in lasting if f["detected"]]
    still_open = sum(bool(f["open_at_end"]) for f in detected)
    return {
        "lasting_faults": len(lasting),
        "lasting_detected": len(detected),
        "lasting_open": still_open,
        "lasting_open_at_end": _ratio(still_open, len(detected)),
    }


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
    incidents = sum(t for _, t in by_kind.values())
    total_alerts = sum(m["alerts"] for m in matched)
    false_alerts = sum(m["false_alerts"] for m in matched)
    return {
        "incidents": incidents,
        **_shared_figures(matched, by_kind, delays, loc_hits, loc_total, labelled_components, raised="alerts"),
        **_lasting_figures([inc for m in matched for inc in m["incidents"]]),
        "alerts": total_alerts,
        "false_alerts": false_alerts,
        "false_alarm_share": _ratio(false_alerts, total_alerts),
        "per_run": matched,
    }


def _shared_figures(matched, by_kind, delays, loc_hits, loc_total, labelled, raised) -> dict:
    """The figures both levels report alike; `raised` names what a benign run must not have ("alerts", "incidents")."""
    detected = sum(d for d, _ in by_kind.values())
    benign = [m for m in matched if m["benign"]]
    benign_alerted = sorted(m["run"] for m in benign if m[raised])
    return {
        "runs": len(matched),
        "detected": detected,
        "recall": _ratio(detected, sum(t for _, t in by_kind.values())),
        "recall_by_kind": {kind: {"detected": d, "incidents": t, "recall": _ratio(d, t)}
                           for kind, (d, t) in sorted(by_kind.items())},
        "benign_runs": len(benign),
        "benign_runs_alerted": len(benign_alerted),
        "benign_runs_alerted_names": benign_alerted,
        "median_delay": statistics.median(delays) if delays else None,
        "p90_delay": nearest_rank(delays, 90),
        "delays": sorted(delays),
        "localization": _ratio(loc_hits, loc_total),
        "localized": loc_hits,
        "localization_incidents": loc_total,
        "incidents_with_component": labelled,
    }


# --------------------------------------------------------------------------------------
# Incidents: the client-side stand-in, and scoring
# --------------------------------------------------------------------------------------

def signal_class(metric) -> int:
    return SIGNAL_CLASSES.get(metric or "", OTHER_SIGNAL)


def _rule_name(alert: dict):
    rule = alert.get("rule")
    return rule.get("name") if isinstance(rule, dict) else rule


def _severity(alerts: list[dict]):
    levels = []
    for a in alerts:
        rule = a.get("rule")
        response = rule.get("permitted_response") if isinstance(rule, dict) else a.get("permitted_response")
        if response in RESPONSE_ORDER:
            levels.append(RESPONSE_ORDER.index(response))
    return RESPONSE_ORDER[max(levels)] if levels else None


def origin_alert(alerts: list[dict]) -> dict:
    """The stand-in's origin: weights > activations > gradients > loss > others, then earliest fired step, then id."""
    return min(alerts, key=lambda a: (signal_class(a.get("metric")), fired_step(a), a["id"]))


def group_alerts(run: str, alerts: list[dict], gap: int = STANDIN_GAP) -> list[dict]:
    """Client-side stand-in for `GET /api/v1/incidents/?run=`: the run's alerts in fired-step order, a
    new incident whenever an alert fires more than `gap` steps after the previous one; each incident in
    the endpoint's shape, its origin chosen by `origin_alert`, its state the first of firing, acknowledged,
    muted, resolved that one of its alerts has (the console's order; needs_review, which depends on the
    rule's kind, is not known here), None when no alert has a state."""
    ordered = sorted(alerts, key=lambda a: (fired_step(a), a["id"]))
    groups: list[list[dict]] = []
    for a in ordered:
        if groups and fired_step(a) - fired_step(groups[-1][-1]) <= gap:
            groups[-1].append(a)
        else:
            groups.append([a])
    incidents = []
    for n, members in enumerate(groups, start=1):
        o = origin_alert(members)
        radius = sorted({(a.get("metric") or "", alert_component(a)) for a in members if a is not o}
                        - {(o.get("metric") or "", alert_component(o))})
        states = {a.get("state") for a in members}
        state = next((st for st in STANDIN_STATE_ORDER if st in states), None)
        incidents.append({
            "id": f"standin-{run}-{n}",
            "run": run,
            "state": state,
            "severity": _severity(members),
            "first_step": min(fired_step(a) for a in members),
            "origin": {"alert": o["id"], "rule": _rule_name(o), "metric": o.get("metric"),
                       "component": alert_component(o), "step": fired_step(o)},
            "alerts": [a["id"] for a in members],
            "blast_radius": [{"metric": m, "component": c} for m, c in radius],
            "opened_at": min((a.get("fired_at") for a in members if a.get("fired_at")), default=None),
            "resolved_at": None if state != "resolved" else max((a.get("resolved_at") or "" for a in members), default=None) or None,
        })
    return incidents


def incident_step(incident: dict, alerts_by_id: dict) -> int:
    steps = [fired_step(alerts_by_id[i]) for i in incident.get("alerts") or [] if i in alerts_by_id]
    return min(steps) if steps else incident["first_step"]


def origin_component(incident: dict) -> str:
    origin = incident.get("origin") or {}
    return origin.get("component") or ""


def match_run_incidents(run: dict, incidents: list[dict], alerts: list[dict] = ()) -> dict:
    """Per-run matching at the incident level (see the module docstring)."""
    by_id = {a["id"]: a for a in alerts}
    windows = [incident_window(f, run["last_step"]) for f in run["incidents"]]
    per_fault = [[] for _ in run["incidents"]]
    false_incidents = []
    for inc in incidents:
        st = incident_step(inc, by_id)
        hit = False
        for i, (lo, hi) in enumerate(windows):
            if lo <= st <= hi:
                per_fault[i].append((st, inc))
                hit = True
        if not hit:
            false_incidents.append(inc)
    faults = []
    for fault, window, hits in zip(run["incidents"], windows, per_fault):
        hits.sort(key=lambda sv: (sv[0], str(sv[1]["id"])))
        first = hits[0] if hits else None
        comp = fault.get("component") or ""
        named = origin_component(first[1]) if first else None
        faults.append({
            "kind": fault["kind"],
            "start_step": fault["start_step"],
            "end_step": fault.get("end_step"),
            "component": comp,
            "window": list(window),
            "detected": first is not None,
            "delay": (first[0] - fault["start_step"]) if first else None,
            "incidents": len(hits),
            "first_incident": first[1]["id"] if first else None,
            "origin_component": named,
            "origin_metric": ((first[1].get("origin") or {}).get("metric")) if first else None,
            "localized": (named == comp) if first else None,
            "lasting": fault.get("end_step") is None,
            "open_at_end": (any(incident_open(inc) for _, inc in hits) if first else None)
            if fault.get("end_step") is None else None,
            "states": [inc.get("state") for _, inc in hits],
        })
    return {
        "run": run["run"],
        "split": run.get("split"),
        "benign": not run["incidents"],
        "incidents": len(incidents),
        "false_incidents": len(false_incidents),
        "alerts_per_incident": [len(i.get("alerts") or []) for i in incidents],
        "first_step": min((incident_step(i, by_id) for i in incidents), default=None),
        "faults": faults,
        "false": [incident_summary(i, by_id) for i in sorted(false_incidents, key=lambda i: (incident_step(i, by_id), str(i["id"])))],
    }


def incident_summary(incident: dict, alerts_by_id: dict) -> dict:
    """Who an incident is, as a page: its id, step, origin (rule, metric, component), severity and state."""
    origin = incident.get("origin") or {}
    return {
        "id": incident.get("id"),
        "step": incident_step(incident, alerts_by_id),
        "rule": origin.get("rule"),
        "metric": origin.get("metric"),
        "component": origin.get("component") or "",
        "severity": incident.get("severity"),
        "state": incident.get("state"),
        "alerts": len(incident.get("alerts") or []),
    }


def score_incidents(runs: list[dict], incidents_by_run: dict[str, list[dict]],
                    alerts_by_run: dict[str, list[dict]] | None = None) -> dict:
    """Incident-level figures over the given runs (incidents of runs not listed are ignored)."""
    alerts_by_run = alerts_by_run or {}
    matched = [match_run_incidents(r, incidents_by_run.get(r["run"], []), alerts_by_run.get(r["run"], [])) for r in runs]
    by_kind = defaultdict(lambda: [0, 0])
    delays, loc_hits, loc_total, labelled, per_fault = [], 0, 0, 0, []
    for m in matched:
        for f in m["faults"]:
            by_kind[f["kind"]][1] += 1
            labelled += bool(f["component"])
            if f["detected"]:
                by_kind[f["kind"]][0] += 1
                delays.append(f["delay"])
                per_fault.append(f["incidents"])
                if f["component"]:
                    loc_total += 1
                    loc_hits += bool(f["localized"])
    faults = sum(t for _, t in by_kind.values())
    total = sum(m["incidents"] for m in matched)
    false = sum(m["false_incidents"] for m in matched)
    sizes = [n for m in matched for n in m["alerts_per_incident"]]
    return {
        "faults": faults,
        **_shared_figures(matched, by_kind, delays, loc_hits, loc_total, labelled, raised="incidents"),
        **_lasting_figures([f for m in matched for f in m["faults"]]),
        "incidents": total,
        "false_incidents": false,
        "false_alarm_share": _ratio(false, total),
        "median_alerts_per_incident": statistics.median(sizes) if sizes else None,
        "max_alerts_per_incident": max(sizes) if sizes else None,
        "median_incidents_per_fault": statistics.median(per_fault) if per_fault else None,
        "max_incidents_per_fault": max(per_fault) if per_fault else None,
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
    lines.append(_lasting_row("lasting faults with an alert still open at the end", f))
    return "\n".join(lines)


def _lasting_row(label: str, f: dict) -> str:
    return (f"| {label} | {_ratio_text(f['lasting_open_at_end'])} ({f['lasting_open']}/{f['lasting_detected']} detected; "
            f"{f['lasting_faults']} labelled without an end) | = 1.0 | {_verdict('lasting_open_at_end', f['lasting_open_at_end'])} |")


def format_incident_table(f: dict, title: str, source: str) -> str:
    lines = [f"### {title}: {f['runs']} runs, {f['faults']} faults, {f['benign_runs']} benign runs, {f['incidents']} incidents ({source})", ""]
    lines.append("| figure | value | target | |")
    lines.append("| --- | ---: | ---: | --- |")
    lines.append(f"| recall | {_ratio_text(f['recall'])} ({f['detected']}/{f['faults']}) | ≥ 0.95 | {_verdict('recall', f['recall'])} |")
    for kind, k in f["recall_by_kind"].items():
        lines.append(f"| · recall {kind} | {_ratio_text(k['recall'])} ({k['detected']}/{k['incidents']}) | ≥ 0.95 | "
                     f"{_verdict('recall', k['recall'])} |")
    lines.append(f"| false-alarm share | {_ratio_text(f['false_alarm_share'])} ({f['false_incidents']}/{f['incidents']}) | ≤ 0.05 | "
                 f"{_verdict('false_alarm_share', f['false_alarm_share'])} |")
    names = ", ".join(f["benign_runs_alerted_names"][:8]) + (" …" if len(f["benign_runs_alerted_names"]) > 8 else "")
    lines.append(f"| benign runs with any incident | {f['benign_runs_alerted']}/{f['benign_runs']}"
                 f"{' (' + names + ')' if names else ''} | 0 | "
                 f"{_verdict('benign_runs_alerted', f['benign_runs_alerted'] if f['benign_runs'] else None)} |")
    lines.append(f"| median delay (steps) | {_fmt(f['median_delay'], 1)} | ≤ 10 | {_verdict('median_delay', f['median_delay'])} |")
    lines.append(f"| p90 delay (steps, nearest rank) | {_fmt(f['p90_delay'])} | | |")
    lines.append(f"| localization (origin = faulty component) | {_ratio_text(f['localization'])} ({f['localized']}/{f['localization_incidents']} detected; "
                 f"{f['incidents_with_component']} labelled with a component) | ≥ 0.9 | {_verdict('localization', f['localization'])} |")
    lines.append(f"| alerts per incident, median / max | {_fmt(f['median_alerts_per_incident'], 1)} / {_fmt(f['max_alerts_per_incident'])} | median ≤ 2 | "
                 f"{_verdict('median_alerts_per_incident', f['median_alerts_per_incident'])} |")
    lines.append(f"| incidents per detected fault, median / max | {_fmt(f['median_incidents_per_fault'], 1)} / {_fmt(f['max_incidents_per_fault'])} | | |")
    lines.append(_lasting_row("lasting faults still open at the end", f))
    return "\n".join(lines)


def format_incident_run_line(m: dict) -> str:
    parts = [f"{m['run']} [{m['split']}{', benign' if m['benign'] else ''}]: incidents {m['incidents']} "
             f"(false {m['false_incidents']}; alerts each {m['alerts_per_incident']})"]
    for f in m["faults"]:
        where = f"@{f['component']}" if f["component"] else ""
        if f["detected"]:
            loc = "" if not f["component"] else (" localized" if f["localized"] else f" origin {f['origin_component'] or 'run'}")
            parts.append(f"{f['kind']}{where} {f['start_step']}: delay {f['delay']}, {f['incidents']} incident(s), origin metric "
                         f"{f['origin_metric']}{loc}{_open_text(f)}")
        else:
            parts.append(f"{f['kind']}{where} {f['start_step']}: missed")
    return "; ".join(parts)


def format_run_line(m: dict) -> str:
    parts = [f"{m['run']} [{m['split']}{', benign' if m['benign'] else ''}]: alerts {m['alerts']} "
             f"(true {m['true_alerts']}, false {m['false_alerts']}), first fired step {_fmt(m['first_fired_step'])}"]
    for inc in m["incidents"]:
        where = f"@{inc['component']}" if inc["component"] else ""
        if inc["detected"]:
            loc = "" if not inc["component"] else (" localized" if inc["localized"] else f" named {inc['first_component'] or 'run'}")
            parts.append(f"{inc['kind']}{where} {inc['start_step']}: delay {inc['delay']}{loc}{_open_text(inc)}")
        else:
            parts.append(f"{inc['kind']}{where} {inc['start_step']}: missed")
    return "; ".join(parts)


def _open_text(fault: dict) -> str:
    if fault.get("open_at_end") is None:
        return ""
    return ", open at the end" if fault["open_at_end"] else ", RESOLVED before the end"


# --------------------------------------------------------------------------------------
# The real runs, one by one
# --------------------------------------------------------------------------------------

def real_runs_check(runs: list[dict], alerts_by_run: dict, incidents_by_run: dict, within: int = REAL_WITHIN) -> dict:
    """Per real run (see the module docstring): `faults` (a row per labelled fault of a run that has
    them) and `benign` (a row per run without a label, with its incidents as pages)."""
    faults, benign = [], []
    for run in runs:
        alerts = alerts_by_run.get(run["run"], [])
        incidents = incidents_by_run.get(run["run"], [])
        by_id = {a["id"]: a for a in alerts}
        if not run["incidents"]:
            benign.append({"run": run["run"], "split": run.get("split"), "last_step": run["last_step"],
                           "pages": [incident_summary(i, by_id) for i in
                                     sorted(incidents, key=lambda i: (incident_step(i, by_id), str(i["id"])))],
                           "alerts": len(alerts)})
            continue
        for fault in run["incidents"]:
            lo, hi = incident_window(fault, run["last_step"])
            hit = alerted_within(alerts, fault["start_step"], within)
            true_incidents = [i for i in incidents if lo <= incident_step(i, by_id) <= hi]
            open_states = sorted({i.get("state") for i in true_incidents if incident_open(i)})
            faults.append({
                "run": run["run"], "split": run.get("split"), "kind": fault["kind"],
                "start_step": fault["start_step"], "end_step": fault.get("end_step"), "last_step": run["last_step"],
                "within": within, "first_fired_step": hit, "alerted": hit is not None,
                "delay": None if hit is None else hit - fault["start_step"],
                "incidents": len(true_incidents),
                "states": [i.get("state") for i in true_incidents],
                "open_at_end": bool(open_states), "open_states": open_states,
                "alert_open_at_end": any(alert_open(a) for a in alerts if lo <= fired_step(a) <= hi),
            })
    return {"within": within, "faults": faults, "benign": benign}


def format_real_runs(check: dict, title: str) -> str:
    lines = [f"### {title}: the real runs", ""]
    for f in check["faults"]:
        alerted = f"yes (+{f['delay']}, fired at step {f['first_fired_step']:,})" if f["alerted"] else "NO"
        if f["open_at_end"]:
            still = f"yes ({', '.join(f['open_states'])})"
        elif f["incidents"]:
            counts = Counter(str(st) for st in f["states"])
            still = "NO (" + (f"{f['incidents']} incidents: " if f["incidents"] > 1 else "") + ", ".join(
                f"{n} {st}" if f["incidents"] > 1 else st for st, n in sorted(counts.items())) + ")"
        else:
            still = "NO (no incident)"
        lines.append(f"- {f['run']} [{f['split']}], {f['kind']} at {f['start_step']:,}: alerted within {f['within']} steps: "
                     f"{alerted}; still open or needing review at the last step ({f['last_step']:,}): {still}")
    for b in check["benign"]:
        shown = b["pages"][:REAL_PAGES_SHOWN]
        pages = "none" if not b["pages"] else (f"{len(b['pages'])}: " if len(b["pages"]) > 1 else "") + "; ".join(
            f"{p['rule'] or '?'} ({p['metric'] or 'event'}{'@' + p['component'] if p['component'] else ''}) at {p['step']:,}, {p['state']}"
            for p in shown) + (f"; … {len(b['pages']) - len(shown)} more" if len(b["pages"]) > len(shown) else "")
        lines.append(f"- {b['run']} [{b['split']}, benign]: paged: {pages}")
    if not check["faults"] and not check["benign"]:
        lines.append("- no real run replayed")
    return "\n".join(lines)
