"""A run's chronicle: what happened to it, in time order, and the cause of each interruption.

`chronicle(run)` lists identity and its changes, attempts and rewinds (each restart with its cause),
alerts with their changes and verdicts, incidents, mutes, reviews with their activity and decision-log
entries, each as {"at": iso time, "step": int|None, "kind": …, "title": …, "detail": {…}, "link": href|None},
ordered by wall time, ties by step (entries without a step after those with one), then as listed.

`attempts(run)` gives each attempt with its cause and its effective training time:

- The cause of an interruption (every attempt after the first), first rule that holds wins:
  1. **planned/manual**: a decision-log entry of the run with decision `terminate` or `intervene`
     written after the previous attempt began and no later than the restart (a person stopped it);
  2. **hardware**: an Alertmanager event, or a job-reported event of the system layer, that arrived
     during the previous attempt (its `attempt` is the previous one) and lies shortly before the
     restart: its step within CAUSE_WINDOW_STEPS of the previous attempt's last step, or its time
     within CAUSE_WINDOW_SECONDS before the restart;
  3. **numeric alert**: an alert of the run of a numeric kind (NUMERIC_KINDS; not judged a false
     alarm) that fired no later than the restart and whose steps reach into the previous attempt's
     last CAUSE_WINDOW_STEPS steps (first step at or before its last step, last step at or after that
     last step minus the window);
  4. **unknown**.
  "No later than the restart" compares batches where both are known (the alert's `fired` row names
  the batch whose evaluation fired it; a batch that holds the restart is evaluated after it is stored,
  so an alert fired by that batch counts as before it), else wall times. Every candidate found is kept
  in `evidence`, not only the winning one.
  An attempt whose first CAUSE_WINDOW_STEPS steps are followed by a numeric alert (other than the one
  named as its cause) is a **failed restore**: the alerts are in `followed_by`.

- Effective training time: an attempt *computed* the steps from its first step to its highest step;
  it *kept* those that no later attempt re-did (a later attempt starting at or below them rewinds them
  away). Time per attempt is from its first to its last point by the points' own times (the sender's
  `time`, else the time their batch was received), read from the attempt's first and last batches.
"""
from __future__ import annotations

from datetime import datetime, timezone as dt_timezone

import numpy as np
from django.db.models import Max, Min
from django.urls import reverse

from alerts.models import Alert, AlertChange, ChangeKind, Incident, Mute, MuteScope, Verdict
from ingest.models import Attempt, Block, Event, EventSource, IdentityChange, Layer, Phase
from ingest.storage import unpack
from reviews.models import DecisionKind, LogEntry, Review, ReviewActivity

# How far before a restart a hardware event or a numeric alert still counts as its cause, in steps
# (the previous attempt's last steps) and, for events, in wall-clock seconds before the restart.
# ~100 steps is the distance PaLM rewound before a spike; 15 minutes covers a node's failure being
# reported by Alertmanager (its group_wait and group_interval) before the job is restarted.
CAUSE_WINDOW_STEPS = 100
CAUSE_WINDOW_SECONDS = 15 * 60

# Rule kinds whose alerts are about the numbers a job computes (absence means no data came: a symptom of
# the stop itself, not a cause; event alerts follow the job's or Alertmanager's own events, judged above).
NUMERIC_KINDS = ("nonfinite", "threshold", "band", "divergence", "weight_jump", "reference")


class Cause:
    PLANNED = "planned/manual"
    HARDWARE = "hardware"
    NUMERIC = "numeric alert"
    UNKNOWN = "unknown"
    ORDER = (PLANNED, HARDWARE, NUMERIC, UNKNOWN)


def iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _from_unix(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=dt_timezone.utc)


def run_link(run) -> str:
    return reverse("console:run", args=[run.run_id])


def _review_link(review_id) -> str:
    return reverse("console:review", args=[review_id])


# --- attempts, causes and effective time

def _attempt_extents(run) -> dict[int, dict]:
    """Per attempt: first and last step stored, first and last batch (receipt ids), from the blocks."""
    rows = (
        Block.objects.filter(series__run=run).values("attempt")
        .annotate(first=Min("first_step"), last=Max("last_step"), first_receipt=Min("receipt_id"), last_receipt=Max("receipt_id"))
    )
    return {row["attempt"]: row for row in rows}


def _times_of_batch(run, attempt: int, receipt_id: int):
    """The points' own times in one batch of one attempt (received time where the sender gave none)."""
    blocks = Block.objects.filter(series__run=run, attempt=attempt, receipt_id=receipt_id).select_related("receipt")
    found = []
    for block in blocks:
        _, _, times = unpack(bytes(block.data))
        if times is None:
            found.append(np.array([block.receipt.received_at.timestamp()]))
        else:
            found.append(times)
    return np.concatenate(found) if found else np.array([])


def _first_receipts(run) -> dict[int, int]:
    """The first batch that carried each attempt (blocks, phases or events), as a receipt id."""
    first = {}
    for rows in (Block.objects.filter(series__run=run), Phase.objects.filter(run=run), Event.objects.filter(run=run)):
        for row in rows.values("attempt").annotate(r=Min("receipt_id")):
            first[row["attempt"]] = min(first.get(row["attempt"], row["r"]), row["r"])
    return first


def _alert_row(alert: Alert) -> dict:
    return {"id": alert.pk, "rule": alert.rule.name, "component": alert.component or None, "metric": alert.metric or None,
            "condition": alert.condition or None, "first_step": alert.first_step, "fired_step": alert.fired_step,
            "fired_at": iso(alert.fired_at), "state": alert.state, "verdict": alert.verdict,
            "permitted_response": alert.rule.permitted_response}


def _event_row(event: Event) -> dict:
    return {"id": event.pk, "source": event.source, "layer": event.layer, "component": event.component,
            "condition": event.condition, "step": event.step, "time": iso(_from_unix(event.time)), "detail": event.detail}


def _entry_row(entry: LogEntry) -> dict:
    return {"id": entry.pk, "decision": entry.decision, "observation": entry.observation, "action": entry.action,
            "owner": entry.owner, "at": iso(entry.at), "step": entry.step}


def attempts(run, times: bool = True) -> list[dict]:
    """Each attempt of the run with its cause, evidence and effective time (see the module's docstring).

    times=False leaves `seconds` out (None): it reads two batches' points per attempt.
    """
    rows = list(Attempt.objects.filter(run=run).order_by("number"))
    extents = _attempt_extents(run)
    first_receipt = _first_receipts(run)
    fired_receipt = dict(
        AlertChange.objects.filter(alert__run=run, kind=ChangeKind.FIRED).values_list("alert_id", "receipt_id")
    )
    numeric = list(Alert.objects.filter(run=run, rule__kind__in=NUMERIC_KINDS).exclude(verdict=Verdict.FALSE_ALARM)
                   .select_related("rule").order_by("fired_at", "id"))
    events = list(Event.objects.filter(run=run).exclude(source=EventSource.JOB, layer__in=[l for l in Layer.values if l != Layer.SYSTEM])
                  .order_by("time", "id"))
    decisions = list(LogEntry.objects.filter(run=run, decision__in=[DecisionKind.TERMINATE, DecisionKind.INTERVENE]).order_by("at", "id"))

    out = []
    for index, attempt in enumerate(rows):
        extent = extents.get(attempt.number, {})
        first = extent.get("first") if extent.get("first") is not None else attempt.start_step
        if attempt.start_step is not None and first is not None:
            first = min(first, attempt.start_step)
        last = extent.get("last")
        later_starts = [a.start_step for a in rows[index + 1:] if a.start_step is not None]
        computed = kept = 0
        if first is not None and last is not None:
            computed = last - first + 1
            kept_last = min([last, *[s - 1 for s in later_starts]])
            kept = max(0, kept_last - first + 1)
        seconds = None
        if times and extent.get("first_receipt") is not None:
            start_times = _times_of_batch(run, attempt.number, extent["first_receipt"])
            end_times = _times_of_batch(run, attempt.number, extent["last_receipt"])
            if len(start_times) and len(end_times):
                seconds = max(0.0, float(end_times.max() - start_times.min()))
        row = {
            "number": attempt.number, "reason": attempt.reason, "started_at": iso(attempt.started_at),
            "start_step": attempt.start_step, "previous_max_step": attempt.previous_max_step,
            "is_rewind": attempt.is_rewind, "rewound_steps": (attempt.previous_max_step - attempt.start_step + 1) if attempt.is_rewind else 0,
            "first_step": first, "last_step": last, "steps_computed": computed, "steps_kept": kept, "seconds": seconds,
            "cause": None, "evidence": {}, "followed_by": [], "failed_restore": False,
        }
        if index > 0:
            previous = rows[index - 1]
            _classify(row, attempt, previous, extents.get(previous.number, {}), first_receipt, fired_receipt, numeric, events, decisions)
        out.append(row)
    return out


def _before_restart(receipt_id, at, restart_receipt, restart_at) -> bool:
    if receipt_id is not None and restart_receipt is not None:
        return receipt_id <= restart_receipt
    return at <= restart_at


def _classify(row, attempt, previous, previous_extent, first_receipt, fired_receipt, numeric, events, decisions):
    prev_end = attempt.previous_max_step if attempt.previous_max_step is not None else previous_extent.get("last")
    restart_receipt = first_receipt.get(attempt.number)
    restart_at = attempt.started_at
    evidence = {}

    planned = [d for d in decisions if previous.started_at <= d.at <= restart_at]
    if planned:
        evidence[Cause.PLANNED] = [_entry_row(d) for d in planned]

    hardware = []
    for event in events:
        if event.attempt != previous.number:
            continue
        near_in_steps = prev_end is not None and prev_end - CAUSE_WINDOW_STEPS <= event.step <= prev_end
        gap = restart_at.timestamp() - event.time
        near_in_time = 0 <= gap <= CAUSE_WINDOW_SECONDS
        if near_in_steps or near_in_time:
            hardware.append(event)
    if hardware:
        evidence[Cause.HARDWARE] = [_event_row(e) for e in hardware]

    causing = []
    if prev_end is not None:
        for alert in numeric:
            if not _before_restart(fired_receipt.get(alert.pk), alert.fired_at, restart_receipt, restart_at):
                continue
            if alert.first_step <= prev_end and alert.last_step >= prev_end - CAUSE_WINDOW_STEPS:
                causing.append(alert)
    if causing:
        evidence[Cause.NUMERIC] = [_alert_row(a) for a in causing]

    row["cause"] = next((c for c in Cause.ORDER if c in evidence), Cause.UNKNOWN)
    row["evidence"] = evidence
    start = row["first_step"]
    if start is not None:
        named = {a.pk for a in causing}
        after = [a for a in numeric if a.pk not in named and start <= a.first_step <= start + CAUSE_WINDOW_STEPS]
        row["followed_by"] = [_alert_row(a) for a in after]
        row["failed_restore"] = bool(after)


def effective_time(rows: list[dict]) -> dict:
    computed = sum(r["steps_computed"] for r in rows)
    kept = sum(r["steps_kept"] for r in rows)
    seconds = [r["seconds"] for r in rows if r["seconds"] is not None]
    return {"steps_computed": computed, "steps_kept": kept, "steps_redone": computed - kept,
            "share_kept": (kept / computed) if computed else None, "seconds": sum(seconds) if seconds else None}


def cause_title(row) -> str:
    if row["cause"] == Cause.NUMERIC:
        names = ", ".join(sorted({a["rule"] for a in row["evidence"][Cause.NUMERIC]}))
        return f"numeric alert ({names})"
    if row["cause"] == Cause.HARDWARE:
        first = row["evidence"][Cause.HARDWARE][0]
        return f"hardware ({first['condition']} on {first['component']})"
    if row["cause"] == Cause.PLANNED:
        first = row["evidence"][Cause.PLANNED][0]
        return f"planned/manual ({first['decision']} by {first['owner']})"
    return row["cause"] or ""


# --- the chronicle

def chronicle(run, attempt_rows: list[dict] | None = None) -> list[dict]:
    """Everything that happened to the run, in time order (see the module's docstring)."""
    entries = []
    page = run_link(run)

    def add(at, step, kind, title, detail=None, link=None):
        entries.append({"at": at, "step": step, "kind": kind, "title": title, "detail": detail or {}, "link": link})

    attempt_rows = attempts(run) if attempt_rows is None else attempt_rows
    # The run's row is stamped a moment after its first attempt's (same request): the run comes first.
    first_seen = min([run.created_at, *[datetime.fromisoformat(r["started_at"]) for r in attempt_rows[:1]]])
    add(first_seen, attempt_rows[0]["first_step"] if attempt_rows else None, "run", f"Run {run.run_id} first seen",
        {"name": run.name, "code_rev": run.code_rev, "data_snapshot": run.data_snapshot, "config": run.config,
         "budget": run.budget, "tags": run.tags, "reference": run.reference}, page)
    for change in IdentityChange.objects.filter(run=run).order_by("changed_at", "id"):
        add(change.changed_at, change.step, "identity", f"{change.field} changed", {"field": change.field, "old": change.old, "new": change.new}, page)

    for row in attempt_rows:
        at = datetime.fromisoformat(row["started_at"])
        if row["number"] == 1:
            add(at, row["first_step"], "attempt", "Attempt 1 started", row, page)
            continue
        what = f"rewind from step {row['previous_max_step']} to {row['start_step']}" if row["is_rewind"] else f"restart at step {row['start_step']}"
        title = f"Attempt {row['number']}: {what}; cause: {cause_title(row)}"
        if row["failed_restore"]:
            title += "; failed restore (" + ", ".join(sorted({a["rule"] for a in row["followed_by"]})) + " right after)"
        add(at, row["start_step"], "rewind" if row["is_rewind"] else "restart", title, row, page)

    changes = (AlertChange.objects.filter(alert__run=run).exclude(kind=ChangeKind.EXTENDED)
               .select_related("alert", "alert__rule", "by").order_by("at", "id"))
    for change in changes:
        alert = change.alert
        where = alert.component or "the run"
        words = {
            ChangeKind.FIRED: f"{alert.rule.name} fired on {where}",
            ChangeKind.RESOLVED: f"{alert.rule.name} on {where} resolved",
            ChangeKind.ACKNOWLEDGED: f"{alert.rule.name} on {where} acknowledged",
            ChangeKind.VERDICT: f"{alert.rule.name} on {where}: verdict {change.verdict or alert.verdict}",
            ChangeKind.MUTED: f"{alert.rule.name} on {where} muted",
            ChangeKind.UNMUTED: f"{alert.rule.name} on {where} unmuted (its mute expired)",
        }
        add(change.at, change.step, f"alert.{change.kind}", words.get(change.kind, f"{alert.rule.name}: {change.kind}"),
            {**_alert_row(alert), "change": change.kind, "by": change.by.get_username() if change.by else None,
             "note": change.note, "verdict_given": change.verdict or None},
            reverse("api:alert-detail", args=[alert.pk]))

    for incident in Incident.objects.filter(run=run).select_related("origin", "origin__rule").order_by("opened_at", "id"):
        detail = incident_row(incident)
        origin = f" (origin {incident.origin.rule.name} on {incident.origin.component or 'the run'})" if incident.origin else ""
        add(incident.opened_at, incident.first_step, "incident.opened", f"Incident #{incident.pk} opened{origin}", detail, page)
        if incident.resolved_at:
            add(incident.resolved_at, None, "incident.resolved", f"Incident #{incident.pk} resolved", detail, page)

    rules_here = Alert.objects.filter(run=run).values("rule_id")
    mutes = Mute.objects.filter(run=run) | Mute.objects.filter(scope=MuteScope.RULE, rule_id__in=rules_here)
    for mute in mutes.select_related("rule", "created_by").order_by("created_at", "id"):
        detail = {"id": mute.pk, "scope": mute.scope, "rule": mute.rule.name, "component": mute.component or None,
                  "reason": mute.reason, "expires_at": iso(mute.expires_at), "ended_at": iso(mute.ended_at),
                  "by": mute.created_by.get_username() if mute.created_by else None}
        add(mute.created_at, None, "mute", f"{mute.rule.name} muted ({mute.scope}) until {mute.expires_at:%Y-%m-%d %H:%M}: {mute.reason}", detail, page)
        if mute.ended_at:
            add(mute.ended_at, None, "mute.ended", f"Mute of {mute.rule.name} ended", detail, page)

    for review in Review.objects.filter(run=run).order_by("opened_at", "id"):
        add(review.opened_at, review.opened_step, "review.opened", f"Review #{review.pk} opened ({review.trigger})",
            {"id": review.pk, "trigger": review.trigger, "trigger_detail": review.trigger_detail, "state": review.state,
             "alert": review.alert_id, "incident": review.incident_id}, _review_link(review.pk))
    activity = ReviewActivity.objects.filter(review__run=run).exclude(kind="opened").select_related("by").order_by("at", "id")
    for act in activity:
        who = act.by.get_username() if act.by else "the console"
        step = f" step {act.step}" if act.step else ""
        add(act.at, None, f"review.{act.kind}", f"Review #{act.review_id}: {act.kind}{step} by {who}",
            {"review": act.review_id, "kind": act.kind, "step": act.step, "by": act.by.get_username() if act.by else None,
             "note": act.note}, _review_link(act.review_id))

    for entry in LogEntry.objects.filter(run=run).select_related("author").order_by("at", "id"):
        title = f"Decision: {entry.decision}" if entry.decision else "Log entry"
        if entry.corrects_id:
            title += f" (corrects #{entry.corrects_id})"
        add(entry.at, entry.step, "decision", f"{title} — {entry.observation}",
            {**_entry_row(entry), "explanations": entry.explanations, "expected_next": entry.expected_next,
             "links": entry.links, "next_review": entry.next_review, "corrects": entry.corrects_id, "review": entry.review_id,
             "author": entry.author.get_username() if entry.author else None},
            reverse("api:decision-detail", args=[entry.pk]))

    for position, entry in enumerate(entries):
        entry["_position"] = position
    entries.sort(key=lambda e: (e["at"], e["step"] is None, e["step"] or 0, e["_position"]))
    for entry in entries:
        del entry["_position"]
        entry["at"] = iso(entry["at"])
    return entries


def incident_row(incident: Incident) -> dict:
    alerts = list(Alert.objects.filter(incident=incident).select_related("rule").order_by("first_step", "id"))
    return {
        "id": incident.pk, "state": incident.state, "severity": incident.severity, "first_step": incident.first_step,
        "opened_at": iso(incident.opened_at), "resolved_at": iso(incident.resolved_at),
        "origin": _alert_row(incident.origin) if incident.origin else None,
        "alerts": [_alert_row(a) for a in alerts],
        "verdicts": sorted({a.verdict for a in alerts if a.verdict}),
    }


