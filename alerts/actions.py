"""Directives for the job, returned in the ingest response's `actions` (contract v1).

Only hard-invariant rules whose permitted response is automatic produce one,
and only in a project that has left read-only mode (read-only is the default).
Under a Celery worker a batch's own alerts are judged after its response, so a
directive reaches the job in the answer to its next batch.
"""
from alerts.governance import AUTOMATIC_RESPONSES, HARD_INVARIANT_KINDS
from alerts.models import Alert, AlertState


def pending_actions(project, run_pk) -> list[dict]:
    if project.read_only:
        return []
    alerts = (
        Alert.objects.filter(
            run_id=run_pk,
            state__in=[AlertState.FIRING, AlertState.ACKNOWLEDGED],
            rule__permitted_response__in=AUTOMATIC_RESPONSES,
            rule__kind__in=HARD_INVARIANT_KINDS,
        )
        .select_related("rule")
        .order_by("id")
    )
    return [{"action": a.rule.permitted_response, "alert": a.pk, "rule": a.rule.name} for a in alerts]


def actions_for_batch(sender, project, run_pk, **kwargs) -> list[dict]:
    """ingest.signals.actions_requested: the directives the ingest answer carries."""
    return pending_actions(project, run_pk)
