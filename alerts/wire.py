"""An alert as the API and the console's pages write it (contract v1's alert object)."""
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
