"""Reviews and decision-log entries as the API, the JSONL export and the pages' scripts see them."""
from reviews.lifecycle import TRIGGER_WORDS
from reviews.models import STEP_TITLES


def _user(user):
    return user.get_username() if user is not None else None


def step_as_dict(step) -> dict:
    return {
        "number": step.number,
        "title": STEP_TITLES[step.number],
        "state": step.state or None,
        "summary": step.summary,
        "findings": step.findings,
        "evidence": step.evidence,
        "filled_at": step.filled_at,
        "checked_by": _user(step.checked_by),
        "checked_at": step.checked_at,
        "note": step.note,
    }


def activity_as_dict(row) -> dict:
    return {"kind": row.kind, "step": row.step, "by": _user(row.by), "at": row.at, "note": row.note, "detail": row.detail}


def review_summary(review) -> dict:
    return {
        "id": review.pk,
        "run": review.run.run_id,
        "project": review.run.project.slug,
        "trigger": review.trigger,
        "trigger_words": TRIGGER_WORDS[review.trigger],
        "trigger_detail": review.trigger_detail,
        "alert": review.alert_id,
        "incident": review.incident_id,
        "comparison": review.comparison.run_id if review.comparison_id else None,
        "previous": review.previous_id,
        "state": review.state,
        "opened_at": review.opened_at,
        "opened_by": _user(review.opened_by),
        "opened_step": review.opened_step,
        "decided_at": review.decided_at,
        "url": f"/reviews/{review.pk}/",
    }


def review_as_dict(review) -> dict:
    entry = getattr(review, "decision", None) if review.state == "decided" else None
    return {
        **review_summary(review),
        "steps": [step_as_dict(s) for s in review.steps.select_related("checked_by")],
        "activity": [activity_as_dict(a) for a in review.activity.select_related("by")],
        "decision": entry_as_dict(entry) if entry is not None else None,
    }


def entry_as_dict(entry) -> dict:
    return {
        "id": entry.pk,
        "project": entry.project.slug,
        "run": entry.run.run_id,
        "review": entry.review_id,
        "decision": entry.decision or None,
        "observation": entry.observation,
        "explanations": entry.explanations,
        "action": entry.action,
        "owner": entry.owner,
        "author": _user(entry.author),
        "at": entry.at,
        "step": entry.step,
        "expected_next": entry.expected_next,
        "links": entry.links,
        "next_review": entry.next_review,
        "artifacts_preserved": entry.artifacts_preserved,
        "last_checkpoint_step": entry.last_checkpoint_step,
        "rewind": entry.rewind,
        "corrects": entry.corrects_id,
        "corrected_by": [c.pk for c in entry.corrections.all()],
    }
