"""A review's life: opened (by hand or by a trigger), steps 1-5 filled and checked, decided once; the decision log.

Every path that changes a review or writes to the log goes through here (the API, the pages, the triggers), so
the rules hold everywhere: a review opens once per trigger, is decided once (a conditional update claims it),
a decision carries one or more explanations and its evidence, terminate needs the artifacts confirmed, and
the log is only ever appended to.
"""
from __future__ import annotations

import unicodedata
from datetime import datetime, timezone as dt_timezone
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import Resolver404, get_script_prefix, resolve
from django.utils import timezone

from alerts import incidents as alert_incidents
from alerts.health import publish_review_mark
from alerts.models import Alert, Rule
from ingest.models import RunStatus
from reviews.models import (
    ActivityKind, DecisionKind, LogEntry, Review, ReviewActivity, ReviewState, ReviewStep, ReviewTrigger, StepState,
)

MAX_TEXT = 4000
MAX_EXPLANATIONS = 20
MAX_LINKS = 200
LINK_KINDS = ("alerts", "incidents", "reviews", "steps", "runs")
NEXT_REVIEW_KEYS = ("step", "at", "rule")
TRIAGE_DENIED = "reviews and the decision log are written by the on-call and rule admin roles of the run's project"
FINISHED_WARNING = (
    "This run has finished: nothing is running to intervene on or terminate. Confirm that you mean to record "
    "this decision on a finished run."
)
INTERVENE_WARNING = (
    "Changing what the run computes (data, objective, architecture, optimizer semantics) makes it a new "
    "experiment: compare it as one, not as the same run."
)


def visible_reviews(user):
    """Reviews of the projects the user may see (opsconsole/permissions.py decides which)."""
    from opsconsole.permissions import visible_projects

    return Review.objects.filter(run__project__in=visible_projects(user)).select_related(
        "run__project", "comparison", "opened_by", "alert", "incident"
    )


def set_schedule(project, run, *, every_steps, every_hours, by):
    """A project's review schedule (run None) or one run's own, which replaces the project's for that run.

    Both figures None removes the schedule (returns None): a PUT of nulls is how a schedule is cleared, as a
    DELETE is. Each figure has its floor (reviews.models.schedule_bounds), a 400 naming the field below it.
    """
    from reviews.models import ReviewSchedule, schedule_bounds

    if every_steps is None and every_hours is None:
        remove_schedule(project, run)
        return None
    schedule_bounds(every_steps, every_hours)
    schedule, _ = ReviewSchedule.objects.update_or_create(
        project=project, run=run, defaults={"every_steps": every_steps, "every_hours": every_hours, "updated_by": by},
    )
    return schedule


def change_schedule(project, run, changes: dict, *, by):
    """Change the figures `changes` names, keeping the other (a PATCH); under the row's lock, so two changes of
    different figures at once both hold. None when both figures end up none (removed); DoesNotExist when there
    is no such schedule."""
    from reviews.models import ReviewSchedule

    with transaction.atomic():
        current = ReviewSchedule.objects.select_for_update().get(project=project, run=run)
        figures = {key: changes[key] if key in changes else getattr(current, key) for key in ("every_steps", "every_hours")}
        return set_schedule(project, run, by=by, **figures)


def remove_schedule(project, run) -> bool:
    """Remove a project's schedule (run None) or a run's own (the project's applies to the run again); False if none."""
    from reviews.models import ReviewSchedule

    deleted, _ = ReviewSchedule.objects.filter(project=project, run=run).delete()
    return bool(deleted)


def activity(review, kind, *, by=None, step=None, note="", detail=None, at=None) -> ReviewActivity:
    return ReviewActivity.objects.create(
        review=review, kind=kind, by=by, step=step, note=note, detail=detail or {}, at=at or timezone.now()
    )


def open_review(run, trigger, *, by=None, alert=None, incident=None, due_key="", detail=None, comparison=None,
                fill_now=True, now=None) -> Review | None:
    """Open a review of the run; None when one with the same due_key opened already (a trigger opens one once).

    `fill_now`: fill steps 1-5 before returning (a person waiting on the page); triggers leave it to
    fill_review after their transaction commits (reviews/tasks.py), so evaluation is not slowed by it.
    """
    from reviews.steps.shared import default_comparison

    now = now or timezone.now()
    previous = Review.objects.filter(run=run).order_by("-opened_at", "-id").first()
    try:
        with transaction.atomic():
            review = Review.objects.create(
                run=run, trigger=trigger, trigger_detail=detail or {}, due_key=due_key, alert=alert, incident=incident,
                comparison=comparison or default_comparison(run), previous=previous, opened_at=now, opened_by=by,
                opened_step=run.max_step,
            )
            ReviewStep.objects.bulk_create([ReviewStep(review=review, number=n) for n in range(1, 7)])
            activity(review, ActivityKind.OPENED, by=by, at=now, detail={"trigger": trigger, **(detail or {})})
    except IntegrityError:
        if due_key and Review.objects.filter(run=run, due_key=due_key).exists():
            return None  # opened already by this trigger
        raise
    if fill_now:
        fill_review(review, by=by)
    return review


def incident_of(run, incident_id):
    """The incident a hand-opened review is about: one of the run's own, or the ValidationError naming `incident`."""
    from alerts.models import Incident

    if incident_id in (None, ""):
        return None
    incident = Incident.objects.filter(pk=incident_id, run=run).first() if str(incident_id).isdigit() else None
    if incident is None:
        raise ValidationError({"incident": f"no incident #{incident_id} on run {run.run_id}"})
    return incident


def review_incident(incident, *, by) -> Review:
    """The open review of the incident, or a new one opened by hand: "Review this incident" never opens a second
    while one is open. The incident's row lock makes two people clicking at once land on the same review."""
    from alerts.models import Incident

    with transaction.atomic():
        Incident.objects.select_for_update().filter(pk=incident.pk).first()
        current = Review.objects.filter(incident=incident, state=ReviewState.OPEN).order_by("-opened_at", "-id").first()
        if current is not None:
            return current
        review = open_review(incident.run, ReviewTrigger.MANUAL, by=by, incident=incident, fill_now=False,
                             detail={"incident": incident.pk})
    fill_review(review, by=by)
    return review


def fill_review(review, *, by=None, force=False) -> bool:
    """Fill steps 1-5 from the stored data as they stand now, saving what was shown; idempotent unless `force`.

    Claimed under the review's row lock, so two workers never fill one review twice.
    """
    from reviews.steps import fill

    with transaction.atomic():
        locked = Review.objects.select_for_update().filter(pk=review.pk).first()
        if locked is None or locked.state != ReviewState.OPEN:
            return False
        if not force and ReviewStep.objects.filter(review=locked, number=1, filled_at__isnull=False).exists():
            return False
        now = timezone.now()
        for step in fill(locked):
            ReviewStep.objects.filter(review=locked, number=step["number"]).update(
                state=step["state"], summary=step["summary"], findings=step["findings"], evidence=step["evidence"],
                filled_at=now,
            )
        activity(locked, ActivityKind.FILLED, by=by, at=now,
                 detail={"comparison": locked.comparison.run_id if locked.comparison_id else None})
    return True


def choose_comparison(review, comparison_run, *, by) -> Review:
    """Compare with another run (None: no comparison): steps 1-5 are filled again against it."""
    if comparison_run is not None and comparison_run.pk == review.run_id:
        raise ValidationError({"run": "a run cannot be compared with itself"})
    if comparison_run is not None and comparison_run.project_id != review.run.project_id:
        raise ValidationError({"run": "the comparison run must belong to the same project"})
    _require_open(review)
    Review.objects.filter(pk=review.pk).update(comparison=comparison_run)
    review.comparison = comparison_run
    activity(review, ActivityKind.COMPARISON, by=by,
             detail={"comparison": comparison_run.run_id if comparison_run else None})
    fill_review(review, by=by, force=True)
    return review


def check_step(review, number, *, by, note="") -> ReviewStep:
    """A reviewer went through step `number` (1-5): who and when on the step, and an activity row for each pass."""
    if not isinstance(number, int) or not 1 <= number <= 5:
        raise ValidationError({"number": "steps 1 to 5 are checked; step 6 is the decision"})
    note = _text(note, "note", required=False)
    _require_open(review)
    now = timezone.now()
    ReviewStep.objects.filter(review=review, number=number).update(checked_by=by, checked_at=now, note=note)
    activity(review, ActivityKind.CHECKED, by=by, step=number, note=note, at=now)
    return ReviewStep.objects.get(review=review, number=number)


def _require_open(review):
    if Review.objects.filter(pk=review.pk, state=ReviewState.OPEN).exists():
        return
    raise ValidationError({"review": "this review is decided; open a new review of the run"})


def _text(value, field, *, required=True, limit=MAX_TEXT) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValidationError({field: "must be text"})
    if "\x00" in value:
        raise ValidationError({field: "must not contain NUL characters"})
    value = value.strip()
    if required and not value:
        raise ValidationError({field: "this field is required"})
    if len(value) > limit:
        raise ValidationError({field: f"at most {limit} characters"})
    return value


def _explanations(value) -> list[str]:
    if isinstance(value, str):
        value = [line for line in value.splitlines()]
    if not isinstance(value, list):
        raise ValidationError({"explanations": "a list of one or more competing explanations"})
    cleaned = [_text(item, "explanations", required=False) for item in value]
    cleaned = [item for item in cleaned if item]
    if not cleaned:
        raise ValidationError({"explanations": "give at least one explanation of what was observed"})
    if len(cleaned) > MAX_EXPLANATIONS:
        raise ValidationError({"explanations": f"at most {MAX_EXPLANATIONS} explanations"})
    return cleaned


def _links(value, run) -> dict:
    """{"alerts": [ids], "incidents": [ids], "reviews": [ids], "steps": [steps], "runs": [run ids], "evidence": [{label, href}]}."""
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise ValidationError({"links": "an object of lists: " + ", ".join(LINK_KINDS) + ", evidence"})
    links = {}
    for key, items in value.items():
        if key not in (*LINK_KINDS, "evidence"):
            raise ValidationError({f"links.{key}": "unknown kind of link: " + ", ".join(LINK_KINDS) + ", evidence"})
        if not isinstance(items, list) or len(items) > MAX_LINKS:
            raise ValidationError({f"links.{key}": f"a list of at most {MAX_LINKS}"})
        if key == "evidence":
            links[key] = [_evidence(item) for item in items]
        elif key == "runs":
            if not all(isinstance(i, str) and i for i in items):
                raise ValidationError({"links.runs": "run ids, as text"})
            links[key] = list(dict.fromkeys(items))
        else:
            if not all(type(i) is int and 0 <= i < 2**63 for i in items):
                raise ValidationError({f"links.{key}": "whole numbers (ids, or steps)"})
            links[key] = list(dict.fromkeys(items))
    _check_linked_rows(links, run)
    return links


def _evidence(item) -> dict:
    if not isinstance(item, dict) or not isinstance(item.get("label"), str) or not isinstance(item.get("href"), str):
        raise ValidationError({"links.evidence": "each piece of evidence is {\"label\": text, \"href\": link}"})
    href = _text(item["href"], "links.evidence", limit=1000)
    if not console_path(href):
        raise ValidationError({"links.evidence": "evidence links point into this console: a path it serves, starting with / "
                                                 "(no backslashes, white space or control characters)"})
    return {"label": _text(item["label"], "links.evidence", limit=300), "href": href}


def console_path(href) -> bool:
    r"""Whether `href` is a page of this console: a path (with query and fragment) its own URL resolver serves.

    Starting with "/" and not "//" is not enough: browsers read "\" as "/" and drop tabs and newlines, so
    "/\host", "/\t/host" and "/\n/host" (a backslash, a tab, a newline) lead to another site. The pages show
    stored links through this too (the log is append-only: an entry saved before this check keeps its link,
    shown as text).
    """
    if not isinstance(href, str) or not href.startswith("/") or href.startswith("//"):
        return False
    if any(c == "\\" or c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in href):
        return False
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return False
    path, prefix = unquote(parts.path), get_script_prefix()
    if not path.startswith(prefix):
        return False
    try:
        resolve("/" + path[len(prefix):])
    except Resolver404:
        return False
    return True


def _check_linked_rows(links, run):
    """Linked alerts, incidents and reviews must be the run's project's: a log never points at what its readers cannot see."""
    from alerts.models import Alert, Incident
    from ingest.models import Run

    for key, model, field in (("alerts", Alert, "run__project"), ("incidents", Incident, "run__project"),
                              ("reviews", Review, "run__project")):
        ids = links.get(key) or []
        if ids and model.objects.filter(pk__in=ids, **{field: run.project}).count() != len(ids):
            raise ValidationError({f"links.{key}": f"every linked {key[:-1]} must exist in project {run.project.slug}"})
    run_ids = links.get("runs") or []
    if run_ids and Run.objects.filter(run_id__in=run_ids, project=run.project).count() != len(run_ids):
        raise ValidationError({"links.runs": f"every linked run must exist in project {run.project.slug}"})


def next_review_trigger(value, run, *, now) -> dict | None:
    """{"step": N} (after the run's newest step), {"at": ISO time} (in the future), {"rule": name} (a rule of the project), or several."""
    if value in (None, "", {}):
        return None
    if not isinstance(value, dict):
        raise ValidationError({"next_review": "an object with step, at and/or rule"})
    unknown = set(value) - set(NEXT_REVIEW_KEYS)
    if unknown:
        raise ValidationError({f"next_review.{sorted(unknown)[0]}": "unknown trigger: step, at or rule"})
    trigger = {}
    if value.get("step") is not None:
        step = value["step"]
        if type(step) is not int or not 0 <= step < 2**53:
            raise ValidationError({"next_review.step": "a whole number of steps"})
        if run.max_step is not None and step <= run.max_step:
            raise ValidationError({"next_review.step": f"must be after the run's newest step ({run.max_step})"})
        trigger["step"] = step
    if value.get("at") not in (None, ""):
        try:
            at = datetime.fromisoformat(str(value["at"]))
        except ValueError:
            raise ValidationError({"next_review.at": "an ISO 8601 time, e.g. 2026-12-01T18:00:00+00:00"}) from None
        if timezone.is_naive(at):
            at = timezone.make_aware(at, timezone.get_current_timezone())
        if at <= now:
            raise ValidationError({"next_review.at": "must be in the future"})
        trigger["at"] = at.astimezone(dt_timezone.utc).isoformat()
    if value.get("rule") not in (None, ""):
        if not isinstance(value["rule"], str) or not Rule.objects.filter(project=run.project_id, name=value["rule"]).exists():
            raise ValidationError({"next_review.rule": f"the name of a rule of project {run.project.slug}"})
        trigger["rule"] = value["rule"]
    return trigger or None


def run_finished(run) -> bool:
    """Finished, or at the end of its budget (the evaluation that says so may not have run yet)."""
    budget_steps = (run.budget or {}).get("steps")
    return run.status == RunStatus.FINISHED or bool(budget_steps and run.last_step is not None and run.last_step >= budget_steps)


def write_entry(run, *, by, observation, explanations, action="", owner="", expected_next="", links=None,
                next_review=None, corrects=None, decision="", review=None, artifacts_preserved=False,
                rewind=None, run_finished_ok=False, now=None) -> LogEntry:
    """Append one entry to the run's decision log (a correction names the entry it corrects).

    A decision that names alerts or incidents (links) is a person's word on them: their alerts count as reviewed.
    """
    now = now or timezone.now()
    if decision and decision not in DecisionKind.values:
        raise ValidationError({"decision": "continue, intervene or terminate"})
    if decision and review is None and corrects is None:
        raise ValidationError({"decision": "a decision is made in a review; an entry on the log carries one only as a "
                                           "correction of an entry (corrects)"})
    fields = {
        "observation": _text(observation, "observation"),
        "explanations": _explanations(explanations),
        "action": _text(action, "action", required=decision == DecisionKind.INTERVENE),
        "owner": _text(owner, "owner", limit=300) if owner else (run.project.owner_name or (by.get_username() if by else "")),
        "expected_next": _text(expected_next, "expected_next", required=False),
    }
    if not fields["owner"]:
        raise ValidationError({"owner": "who owns what happens next: this field is required"})
    if corrects is not None and corrects.run_id != run.pk:
        raise ValidationError({"corrects": "a correction is written on the same run as the entry it corrects"})
    if decision and corrects is not None:
        # The corrected decision is the one about the same alerts and incidents: it handles what the original named.
        links = dict(links or {})
        for key in ("alerts", "incidents", "reviews"):
            named = [*(links.get(key) or []), *((corrects.links or {}).get(key) or [])]
            if named:
                links[key] = list(dict.fromkeys(named))
    links = _links(links, run)
    trigger = next_review_trigger(next_review, run, now=now)
    from reviews.steps.checkpoints import last_checkpoint_step

    checkpoint = last_checkpoint_step(run)
    if decision == DecisionKind.TERMINATE and artifacts_preserved is not True:
        where = f"the last checkpoint is at step {checkpoint}" if checkpoint is not None else "no checkpoint was reported"
        raise ValidationError({"artifacts_preserved": f"confirm that the run's artifacts are preserved before terminating ({where})"})
    if decision in (DecisionKind.INTERVENE, DecisionKind.TERMINATE) and run_finished(run) and run_finished_ok is not True:
        # Read by people beside the form's tick box, and by API clients under the field's name (the error's path).
        article = "an" if decision == DecisionKind.INTERVENE else "a"
        raise ValidationError({"run_finished_ok": f"run {run.run_id} has finished: confirm that you mean to record "
                                                  f"{article} {decision} decision on a finished run"})
    with transaction.atomic():
        entry = LogEntry.objects.create(
            project=run.project, run=run, review=review, decision=decision, author=by, at=now, step=run.max_step,
            links=links, next_review=trigger, artifacts_preserved=bool(artifacts_preserved) and decision == DecisionKind.TERMINATE,
            last_checkpoint_step=checkpoint, rewind=rewind, corrects=corrects, **fields,
        )
        if decision and (links.get("alerts") or links.get("incidents")):
            named = Alert.objects.filter(Q(pk__in=links.get("alerts") or []) | Q(incident_id__in=links.get("incidents") or []),
                                         run__project=run.project, reviewed_at__isnull=True)
            touched = set(named.exclude(incident__isnull=True).values_list("incident_id", flat=True))
            # Conditional: the first person's look is the one kept (as alerts/triage.py does).
            named.update(reviewed_at=now)
            publish_review_mark(run)  # the run may no longer need review: its page and the inbox hear so
            for incident_id in sorted(touched):  # an incident waiting for review is no longer
                alert_incidents.refresh(incident_id, by=by, now=now)
    return entry


def decide(review, *, by, decision, observation, explanations, action="", owner="", expected_next="", evidence=None,
           links=None, next_review=None, artifacts_preserved=False, accept_rewind=False, run_finished_ok=False) -> LogEntry:
    """Step 6: the decision, written to the log once; the review is claimed with a conditional update."""
    if decision not in DecisionKind.values:
        raise ValidationError({"decision": "continue, intervene or terminate"})
    links = dict(links or {})
    if evidence:
        links["evidence"] = evidence
    links.setdefault("reviews", [])
    if review.pk not in links["reviews"]:
        links["reviews"] = [review.pk, *links["reviews"]]
    if review.alert_id:
        links.setdefault("alerts", [])
        if review.alert_id not in links["alerts"]:
            links["alerts"].append(review.alert_id)
    # A review of an alert is a review of its incident too: the decision handles both.
    incident_id = review.incident_id or (review.alert.incident_id if review.alert_id else None)
    if incident_id:
        links.setdefault("incidents", [])
        if incident_id not in links["incidents"]:
            links["incidents"].append(incident_id)
    rewind = proposed_rewind(review) if accept_rewind else None
    if accept_rewind and rewind is None:
        raise ValidationError({"accept_rewind": "no rewind was proposed in this review: there is none to record"})
    now = timezone.now()
    with transaction.atomic():
        if not Review.objects.filter(pk=review.pk, state=ReviewState.OPEN).update(state=ReviewState.DECIDED, decided_at=now):
            raise ValidationError({"review": "this review is decided already"})
        entry = write_entry(
            review.run, by=by, observation=observation, explanations=explanations, action=action, owner=owner,
            expected_next=expected_next, links=links, next_review=next_review, decision=decision, review=review,
            artifacts_preserved=artifacts_preserved, rewind=rewind, run_finished_ok=run_finished_ok, now=now,
        )
        ReviewStep.objects.filter(review=review, number=6).update(
            state=StepState.PASS, summary=f"{decision}: {entry.observation[:200]}", filled_at=now, checked_by=by, checked_at=now,
            findings={"entry": entry.pk, "decision": decision}, evidence=links.get("evidence", []),
        )
        activity(review, ActivityKind.DECIDED, by=by, step=6, at=now, detail={"decision": decision, "entry": entry.pk})
    review.state, review.decided_at = ReviewState.DECIDED, now
    return entry


def corrected_decision(entry) -> LogEntry | None:
    """The newest correction (following corrections of corrections) that carries a decision: it stands in for the
    entry's own decision wherever the log is read; None when no correction changed the decision."""
    found, seen = None, {entry.pk}
    current = entry
    while True:
        carrying = [c for c in current.corrections.all() if c.decision and c.pk not in seen]
        if not carrying:
            return found
        current = max(carrying, key=lambda c: (c.at, c.pk))
        seen.add(current.pk)
        found = current


def proposed_rewind(review) -> dict | None:
    """When the review concerns an incident: the rewind the PaLM practice suggests (reviews/steps/checkpoints.py)."""
    from reviews.steps.checkpoints import rewind_proposal

    incident = review.incident
    if incident is None and review.alert_id:
        incident = review.alert.incident
    if incident is None:
        return None
    alert_step = incident.origin.fired_step if incident.origin_id and incident.origin else None
    return rewind_proposal(review.run, incident.first_step, alert_step)


TRIGGER_WORDS = {
    ReviewTrigger.MANUAL: "started by hand",
    ReviewTrigger.ALERT: "an alert of a rule whose permitted response is review",
    ReviewTrigger.SCHEDULE: "the review schedule",
    ReviewTrigger.NEXT_REVIEW: "the previous decision's next-review trigger",
}
