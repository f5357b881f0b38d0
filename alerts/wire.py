"""An alert as the API and the console's pages write it (contract v1's alert object), and the changes of alerts and incidents."""
from alerts.models import Alert
from ingest.wire import wire_value


def alert_as_dict(alert: Alert) -> dict:
    rule = alert.rule
    return {
        "id": alert.pk,
        "run": alert.run.run_id,
        "rule": {
            "id": rule.pk,
            "name": rule.name,
            "owner": rule.owner,
            "permitted_response": rule.permitted_response,
            "diagnostic_url": rule.diagnostic_url,
        },
        "component": alert.component or None,
        "metric": alert.metric or None,
        "condition": alert.condition or None,
        "step": alert.first_step,
        "last_step": alert.last_step,
        "fired_step": alert.fired_step,
        "magnitude": None if alert.magnitude is None else wire_value(alert.magnitude),
        "magnitude_unit": alert.magnitude_unit,
        "phase": alert.phase or None,
        "state": alert.state,
        "verdict": alert.verdict,
        "fired_at": alert.fired_at,
        "resolved_at": alert.resolved_at,
    }


def change_as_dict(change) -> dict:
    """An AlertChange row (`by` loaded)."""
    return {
        "id": change.pk,
        "kind": change.kind,
        "step": change.step,
        "at": change.at,
        "by": change.by.get_username() if change.by_id else None,
        "note": change.note,
        "verdict": change.verdict or None,
    }


def incident_change_as_dict(change) -> dict:
    """An IncidentChange row (`by` loaded)."""
    return {
        "id": change.pk,
        "kind": change.kind,
        "alert": change.alert_id,
        "state": change.state or None,
        "previous": change.previous or None,
        "at": change.at,
        "by": change.by.get_username() if change.by_id else None,
        "note": change.note,
        "verdict": change.verdict or None,
    }
