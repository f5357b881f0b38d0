"""A run's postmortem: its identity, summary figures, interruptions with their causes, effective training
time, incidents, decisions, reviews and the whole chronicle — as JSON (`postmortem`) and Markdown
(`postmortem_markdown`). Everything comes from reviews/chronicle.py; this module only arranges it. In the
Markdown every text is inert (`inert`): HTML and Markdown escaped, no link but http(s) possible.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter

from django.utils import timezone

from alerts.models import Alert, Incident
from reviews.chronicle import CAUSE_WINDOW_SECONDS, CAUSE_WINDOW_STEPS, NUMERIC_KINDS, Cause, attempts, cause_title, chronicle, effective_time, incident_row, iso
from reviews.models import LogEntry, Review
from reviews.steps.shared import run_has_own_times
from reviews.templatetags.chronicle import duration, percent
from reviews.templatetags.words import number, words
from runs.detail import budget_words


def causes_table(rows: list[dict]) -> list[dict]:
    """Interruptions by cause, most frequent first: [{"cause", "count", "share"}] (share of all interruptions)."""
    counts = Counter(r["cause"] for r in rows if r["cause"] is not None)
    total = sum(counts.values())
    order = {cause: i for i, cause in enumerate(Cause.ORDER)}
    return [{"cause": cause, "count": n, "share": n / total}
            for cause, n in sorted(counts.items(), key=lambda item: (-item[1], order.get(item[0], 99)))]


def postmortem(run) -> dict:
    rows = attempts(run)
    entries = chronicle(run, rows)
    interruptions = [r for r in rows if r["number"] > 1]
    incidents = [incident_row(i) for i in Incident.objects.filter(run=run).select_related("origin", "origin__rule").order_by("opened_at", "id")]
    decisions = [
        {"id": e.pk, "decision": e.decision or None, "observation": e.observation, "explanations": e.explanations,
         "action": e.action, "owner": e.owner, "author": e.author.get_username() if e.author else None, "at": iso(e.at),
         "step": e.step, "expected_next": e.expected_next, "links": e.links, "next_review": e.next_review,
         "review": e.review_id, "corrects": e.corrects_id}
        for e in LogEntry.objects.filter(run=run).select_related("author").order_by("at", "id")
    ]
    reviews = [
        {"id": r.pk, "trigger": r.trigger, "state": r.state, "opened_at": iso(r.opened_at), "opened_step": r.opened_step,
         "decided_at": iso(r.decided_at), "alert": r.alert_id, "incident": r.incident_id,
         "decision": getattr(getattr(r, "decision", None), "decision", None) or None}
        for r in Review.objects.filter(run=run).select_related("decision").order_by("opened_at", "id")
    ]
    alerts = Alert.objects.filter(run=run)
    effective = effective_time(rows)
    own = run_has_own_times(run)
    return {
        "run": {
            "run_id": run.run_id, "project": run.project.slug, "name": run.name, "code_rev": run.code_rev,
            "data_snapshot": run.data_snapshot, "config": run.config, "budget": run.budget, "tags": run.tags,
            "reference": run.reference, "status": run.status, "attempt": run.attempt, "max_step": run.max_step,
            "created_at": iso(run.created_at), "last_seen_at": iso(run.last_seen_at),
        },
        "generated_at": iso(timezone.now()),
        "rules": {"cause_window_steps": CAUSE_WINDOW_STEPS, "cause_window_seconds": CAUSE_WINDOW_SECONDS,
                  "numeric_kinds": list(NUMERIC_KINDS), "cause_order": list(Cause.ORDER)},
        "summary": {
            "attempts": len(rows),
            "interruptions": len(interruptions),
            "rewinds": sum(r["is_rewind"] for r in rows),
            "failed_restores": sum(r["failed_restore"] for r in rows),
            "interruptions_by_cause": causes_table(interruptions),
            "alerts": alerts.count(),
            "alerts_actionable": alerts.filter(verdict="actionable").count(),
            "alerts_false_alarm": alerts.filter(verdict="false_alarm").count(),
            "incidents": len(incidents),
            "decisions": len(decisions),
            "reviews": len(reviews),
            **effective,
        },
        "attempts": rows,
        "effective_time": effective,
        # False: the points were sent without their own times; "seconds" then measure the sender's batches.
        "own_times": own,
        "incidents": incidents,
        "decisions": decisions,
        "reviews": reviews,
        "chronicle": entries,
    }


# Text from senders and people (run names, tags, config, decisions, rule names) is made inert before it goes
# into the Markdown: pasted into a wiki, a postmortem must render as the text it holds and run nothing.
_HTML_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Markdown's inline punctuation (emphasis, code, link and image brackets, table cells, strikethrough), escaped
# with a backslash; parentheses and "!" make nothing without an unescaped "[".
_MARKDOWN_PUNCTUATION = frozenset("\\`*_[]|~")
# "scheme:" followed by more than white space ("javascript:alert(1)", not "cause: planned"): its colon is escaped
# unless the scheme is http or https, so no renderer that links bare URLs makes a javascript:, data: or vbscript:
# link of it.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*):(?=\S)")
_LINKED_SCHEMES = {"http", "https"}


def inert(text: str) -> str:
    """`text` as Markdown that renders as the text itself: HTML escaped, Markdown punctuation backslash-escaped,
    the colon of any scheme but http(s) escaped, and line breaks and other control characters as spaces."""
    colons = {m.end() - 1 for m in _SCHEME.finditer(text) if m.group(1).lower() not in _LINKED_SCHEMES}
    out = []
    for i, c in enumerate(text):
        if c in _HTML_ESCAPES:
            out.append(_HTML_ESCAPES[c])
        elif c in _MARKDOWN_PUNCTUATION or i in colons:
            out.append("\\" + c)
        elif unicodedata.category(c) == "Cc" or c in "\u2028\u2029":
            out.append(" ")
        else:
            out.append(c)
    return "".join(out)


def number_words(value):
    return None if value is None else number(value)


def plural(n, noun) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _cell(value) -> str:
    if value is None or value == "":
        return "—"
    text = value if isinstance(value, str) else words(value)
    return inert(text)


def _table(head: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def postmortem_markdown(run, data: dict | None = None) -> str:
    data = postmortem(run) if data is None else data
    r, s = data["run"], data["summary"]
    out = [f"# Postmortem: {inert(r['run_id'])}", ""]
    out += [f"Project `{r['project']}` · generated {data['generated_at']}", "", "## Summary", ""]
    out += _table(["", ""], [
        ["Name", r["name"]], ["Code", r["code_rev"]], ["Data", r["data_snapshot"]], ["Config", words(r["config"], True) if r["config"] else None],
        ["Budget", budget_words(r["budget"]) if r["budget"] else None],
        ["Tags", words(r["tags"], True) if r["tags"] else None], ["Status", r["status"]], ["Highest step", number_words(r["max_step"])],
        ["Attempts", s["attempts"]], ["Interruptions", s["interruptions"]], ["Rewinds", s["rewinds"]],
        ["Failed restores", s["failed_restores"]],
        ["Steps computed", s["steps_computed"]], ["Steps kept", s["steps_kept"]], ["Share kept", percent(s["share_kept"])],
        ["Training time (points' own times)", duration(s["seconds"]) if data["own_times"] else "no time data"],
        ["Alerts", f"{s['alerts']} ({s['alerts_actionable']} actionable, {plural(s['alerts_false_alarm'], 'false alarm')})"],
        ["Incidents", s["incidents"]], ["Decisions", s["decisions"]], ["Reviews", s["reviews"]],
    ])
    out += ["", "## Interruptions", ""]
    rules = data["rules"]
    out += [f"Cause of each restart, first that holds: planned/manual (a terminate or intervene decision since the "
            f"previous attempt began), hardware (an Alertmanager or system-layer event in the previous attempt's last "
            f"{rules['cause_window_steps']} steps or {rules['cause_window_seconds'] // 60} minutes), numeric alert "
            f"(an alert reaching into the previous attempt's last {rules['cause_window_steps']} steps), else unknown.", ""]
    if s["interruptions_by_cause"]:
        out += _table(["Cause", "Count", "Share"], [[c["cause"], c["count"], percent(c["share"])] for c in s["interruptions_by_cause"]])
        out += [""]
    rows = []
    for a in data["attempts"]:
        what = "first" if a["number"] == 1 else (f"rewind {number_words(a['previous_max_step'])} → {number_words(a['start_step'])}"
                                                  if a["is_rewind"] else f"restart at {number_words(a['start_step'])}")
        evidence = []
        for cause, items in a["evidence"].items():
            for item in items:
                if "rule" in item:
                    evidence.append(f"{cause}: {item['rule']} (alert #{item['id']}, step {item['first_step']})")
                elif "decision" in item:
                    evidence.append(f"{cause}: {item['decision']} by {item['owner']} (entry #{item['id']})")
                else:
                    evidence.append(f"{cause}: {item['condition']} on {item['component']} ({item['source']}, step {item['step']})")
        after = ", ".join(f"{x['rule']} at step {number_words(x['first_step'])}" for x in a["followed_by"])
        rows.append([a["number"], what, a["first_step"], a["last_step"], cause_title(a) if a["number"] > 1 else "—",
                     "; ".join(evidence), f"failed restore: {after}" if a["failed_restore"] else "",
                     a["steps_computed"], a["steps_kept"], duration(a["seconds"]), a["started_at"]])
    out += _table(["#", "What", "First step", "Last step", "Cause", "Evidence", "After the restart", "Steps computed",
                   "Steps kept", "Time", "Started"], rows)
    out += ["", "## Incidents", ""]
    if data["incidents"]:
        out += _table(["#", "State", "Severity", "First step", "Origin", "Alerts", "Verdicts", "Opened"], [
            [i["id"], i["state"], i["severity"], i["first_step"],
             f"{i['origin']['rule']} on {i['origin']['component'] or 'the run'}" if i["origin"] else None,
             ", ".join(f"{a['rule']}@{a['component'] or 'run'} (step {a['first_step']}, {a['state']})" for a in i["alerts"]),
             ", ".join(i["verdicts"]), i["opened_at"]] for i in data["incidents"]])
    else:
        out += ["No incidents."]
    out += ["", "## Decisions", ""]
    if data["decisions"]:
        out += _table(["#", "At", "Step", "Decision", "Observation", "Explanations", "Action", "Owner", "Expected next", "Corrects"], [
            [d["id"], d["at"], d["step"], d["decision"], d["observation"], "; ".join(map(str, d["explanations"] or [])),
             d["action"], d["owner"], d["expected_next"], d["corrects"]] for d in data["decisions"]])
    else:
        out += ["No decisions logged."]
    out += ["", "### Reviews", ""]
    if data["reviews"]:
        out += _table(["#", "Trigger", "State", "Opened", "Step", "Decision"], [
            [v["id"], v["trigger"], v["state"], v["opened_at"], v["opened_step"], v["decision"]] for v in data["reviews"]])
    else:
        out += ["No reviews."]
    out += ["", "## Chronicle", ""]
    out += _table(["At", "Step", "Kind", "What"], [[e["at"], e["step"], e["kind"], e["title"]] for e in data["chronicle"]])
    return "\n".join(out) + "\n"
