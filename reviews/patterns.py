"""Per project: interruptions by cause (the Llama 3 report's table), and patterns across its runs.

- `interruptions(project)`: every restart of every run, classified as reviews/chronicle.py does;
  the table is cause, count, share of all interruptions, and how many runs had one.
- `stopped_too_late(project)`: runs terminated long after their first unresolved alert — a terminate
  decision written more than STOPPED_LATE_STEPS steps or STOPPED_LATE_SECONDS after the first alert
  of the run that had fired and was still unresolved when the decision was written.
- `several_variables_changed(project)`: runs whose config differs from their reference run in more
  than one key (reviews/steps/identity.py's `config_diff`), against the run a review compares it with by
  default (`default_comparison`: the project's newest reference run, never the run itself).
- `incident_handling(project)`: each incident as handled by an automatic response (one of its alerts
  is of a hard-invariant rule whose permitted response is stop or rewind, in a project that is not
  read-only: ingest answered the job with that directive), by a human decision (a decision-log entry
  names it in links["incidents"], or a review of it has a decision), both, or neither; with shares.
"""
from __future__ import annotations

from datetime import timedelta

from alerts.governance import AUTOMATIC_RESPONSES, HARD_INVARIANT_KINDS
from alerts.models import Alert, Incident
from ingest.models import CATCH_ALL_SUFFIX, Run
from reviews.chronicle import Cause, attempts
from reviews.models import DecisionKind, LogEntry, Review
from reviews.steps.identity import config_diff
from reviews.steps.shared import default_comparison

# A terminate decision this far past the first still-unresolved alert is "stopping too late".
STOPPED_LATE_STEPS = 1000
STOPPED_LATE_SECONDS = 6 * 3600

def project_runs(project):
    return Run.objects.filter(project=project).exclude(run_id__endswith=CATCH_ALL_SUFFIX).order_by("created_at", "id")


def interruptions(project) -> dict:
    """{"total", "table": [{"cause", "count", "share", "runs"}], "interruptions": [{run, attempt row…}]}."""
    rows = []
    for run in project_runs(project):
        for row in attempts(run, times=False):
            if row["number"] > 1:
                rows.append({"run": run.run_id, **row})
    total = len(rows)
    table = []
    for cause in Cause.ORDER:
        mine = [r for r in rows if r["cause"] == cause]
        if mine:
            table.append({"cause": cause, "count": len(mine), "share": len(mine) / total, "runs": len({r["run"] for r in mine})})
    table.sort(key=lambda t: -t["count"])  # stable: ties keep Cause.ORDER
    return {"total": total, "table": table, "interruptions": rows}


def stopped_too_late(project) -> list[dict]:
    found = []
    terminations = LogEntry.objects.filter(project=project, decision=DecisionKind.TERMINATE).select_related("run").order_by("at", "id")
    for entry in terminations:
        if entry.corrections.exists():
            continue  # corrected: the later entry says what was decided
        open_then = (Alert.objects.filter(run=entry.run, fired_at__lte=entry.at).exclude(resolved_at__lte=entry.at)
                     .select_related("rule").order_by("fired_at", "id"))
        first = open_then.first()
        if first is None:
            continue
        fired_step = first.fired_step if first.fired_step is not None else first.first_step
        steps_late = entry.step - fired_step if entry.step is not None else None
        late_by = entry.at - first.fired_at
        if (steps_late is not None and steps_late > STOPPED_LATE_STEPS) or late_by > timedelta(seconds=STOPPED_LATE_SECONDS):
            found.append({
                "run": entry.run.run_id, "entry": entry.pk, "terminated_at": entry.at.isoformat(), "terminated_step": entry.step,
                "alert": first.pk, "rule": first.rule.name, "alert_fired_at": first.fired_at.isoformat(), "alert_step": fired_step,
                "steps_late": steps_late, "seconds_late": late_by.total_seconds(),
            })
    return found


def several_variables_changed(project) -> list[dict]:
    """Runs whose config differs in more than one key from the run a review compares them with by default."""
    found = []
    for run in project_runs(project).filter(reference=False, config__isnull=False):
        reference = default_comparison(run)
        if reference is None or reference.config is None:
            continue
        diff = config_diff(run.config, reference.config)
        if len(diff) > 1:
            found.append({"run": run.run_id, "reference": reference.run_id, "keys": [d["key"] for d in diff], "diff": diff})
    return found


class Handling:
    AUTOMATIC = "automatic response"
    HUMAN = "human decision"
    BOTH = "both"
    NEITHER = "neither"
    ORDER = (AUTOMATIC, HUMAN, BOTH, NEITHER)


def incident_handling(project) -> dict:
    """{"total", "table": [{"handling", "count", "share"}], "incidents": [{"id", "run", "handling"}]}."""
    incidents = list(Incident.objects.filter(run__project=project).select_related("run").order_by("opened_at", "id"))
    automatic = set()
    if not project.read_only:
        automatic = set(
            Alert.objects.filter(incident__in=incidents, rule__permitted_response__in=AUTOMATIC_RESPONSES,
                                 rule__kind__in=HARD_INVARIANT_KINDS).values_list("incident_id", flat=True)
        )
    human, named_alerts = set(), set()
    for links in LogEntry.objects.filter(project=project).exclude(links={}).values_list("links", flat=True):
        for key, found in (("incidents", human), ("alerts", named_alerts)):
            for ident in (links or {}).get(key) or []:
                if isinstance(ident, int) and not isinstance(ident, bool):
                    found.add(ident)
    # An entry naming one of an incident's alerts names the incident.
    human |= set(Alert.objects.filter(pk__in=named_alerts, incident__in=incidents).values_list("incident_id", flat=True))
    human |= set(Review.objects.filter(run__project=project, incident__isnull=False, decision__isnull=False)
                 .values_list("incident_id", flat=True))
    rows = []
    for incident in incidents:
        auto, person = incident.pk in automatic, incident.pk in human
        handling = Handling.BOTH if auto and person else Handling.AUTOMATIC if auto else Handling.HUMAN if person else Handling.NEITHER
        rows.append({"id": incident.pk, "run": incident.run.run_id, "first_step": incident.first_step, "handling": handling})
    total = len(rows)
    table = [{"handling": h, "count": n, "share": n / total}
             for h in Handling.ORDER if (n := sum(r["handling"] == h for r in rows))]
    return {"total": total, "table": table, "incidents": rows}


def project_patterns(project) -> dict:
    return {
        "project": project.slug,
        "interruptions": interruptions(project),
        "stopped_too_late": stopped_too_late(project),
        "several_variables_changed": several_variables_changed(project),
        "incident_handling": incident_handling(project),
        "thresholds": {"stopped_late_steps": STOPPED_LATE_STEPS, "stopped_late_seconds": STOPPED_LATE_SECONDS},
    }
