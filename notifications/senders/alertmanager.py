"""A team's own Prometheus Alertmanager: the incident pushed to its `/api/v2/alerts` as Prometheus pushes alerts.

While firing, `endsAt` lies ahead and the push is repeated (the sweep, notifications/tasks.py) before it passes,
or Alertmanager would resolve it by itself; on resolution `endsAt` is when the incident ended.
"""
from datetime import datetime, timedelta, timezone

from django.conf import settings

from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage
from notifications.senders import finite, json_bytes, post

PATH = "/api/v2/alerts"


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def alerts_of(target: ChannelTarget, message: IncidentMessage, now: datetime | None = None) -> list[dict]:
    now = now or datetime.now(timezone.utc)
    extra = {str(k): str(v) for k, v in (target.config.get("labels") or {}).items()}
    labels = {**extra, "alertname": message.rule, **{k: str(v) for k, v in message.labels.items()}}
    if message.resolved_at is not None:
        ends = message.resolved_at
    else:
        ends = now + timedelta(seconds=settings.NOTIFY_ALERTMANAGER_REFRESH_SECONDS * 3)
    magnitude = finite(message.magnitude)
    return [{
        "labels": labels,
        "annotations": {
            "summary": message.summary,
            "runbook_url": message.runbook_url,
            "run_url": message.run_url,
            "incident_url": message.incident_url,
            "step": str(message.step),
            "magnitude": "" if magnitude is None else f"{magnitude} {message.magnitude_unit}".strip(),
            "owner": message.owner,
        },
        "startsAt": _iso(message.opened_at),
        "endsAt": _iso(ends),
        "generatorURL": message.run_url,
    }]


def send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome:
    headers = {"Authorization": f"Bearer {target.secret}"} if target.secret else {}
    return post(target.url.rstrip("/") + PATH, json_bytes(alerts_of(target, message)), timeout=target.timeout, headers=headers)
