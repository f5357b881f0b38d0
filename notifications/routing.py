"""Which channel hears what of an incident, and the message it is sent.

- A rule's permitted response decides: an incident whose highest response is `observe` sends nothing; any other
  (`notify`, `review`, and the automatic `stop`/`rewind` above them) sends per incident, never per alert.
- Per channel: `opened` once, when the incident first has a response that sends; `resolved` once, when it ends,
  if `opened` was sent; `updated` when alerts join it or its origin changes, at most once per
  NOTIFY_REPEAT_MINUTES per incident and channel (the others are recorded as `rate_limited`).
- A mute covering the incident's origin (the origin alert is muted, or the whole incident is) holds sending: the
  message is recorded `held`, and sent if the mute ends while the incident is still open.

Routing writes the Notification rows (unique per incident, channel, event and key, so routing twice sends once)
and answers the ids to deliver; notifications/tasks.py, which receives alerts.signals.incident_changed, routes
after evaluation commits and queues one delivery task each. Nothing here touches the network.
"""
from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from alerts.incidents import describe_origin
from alerts.models import Alert, AlertState, Incident, IncidentChangeKind, IncidentState, PermittedResponse
from notifications.message import ChannelTarget, IncidentMessage, NotifyEvent
from notifications.models import Channel, Notification, NotificationState

log = logging.getLogger(__name__)

GROWN = {IncidentChangeKind.JOINED, IncidentChangeKind.ORIGIN}
# The run page link shows this many steps either side of the incident's first step.
RUN_LINK_STEPS = 100


def held(incident) -> bool:
    origin = incident.origin
    return incident.state == IncidentState.MUTED or (origin is not None and origin.state == AlertState.MUTED)


def route(incident_id, kinds=(), now=None) -> list[int]:
    """Record what each enabled channel of the incident's project is to be sent; the ids to deliver now."""
    now = now or timezone.now()
    incident = Incident.objects.select_related("run", "origin").filter(pk=incident_id).first()
    if incident is None or incident.severity == PermittedResponse.OBSERVE:
        return []
    channels = list(Channel.objects.filter(project_id=incident.run.project_id, enabled=True))
    if not channels:
        return []
    mine = {}
    for n in Notification.objects.filter(incident=incident, channel__in=channels, key=""):
        mine[(n.channel_id, n.event)] = n
    is_held, ended = held(incident), incident.state == IncidentState.RESOLVED
    grew = bool(GROWN & set(kinds))
    due = []
    for channel in channels:
        opened = mine.get((channel.pk, NotifyEvent.OPENED))
        if opened is None:
            if not ended:
                state = NotificationState.HELD if is_held else NotificationState.QUEUED
                due += _record(incident, channel, NotifyEvent.OPENED, "", state, now)
        elif opened.state == NotificationState.HELD:
            if not is_held and not ended and Notification.objects.filter(pk=opened.pk, state=NotificationState.HELD).update(
                    state=NotificationState.QUEUED, released_at=now, next_try_at=now):
                due.append(opened.pk)
        elif ended:
            if opened.state == NotificationState.SENT and (channel.pk, NotifyEvent.RESOLVED) not in mine:
                due += _record(incident, channel, NotifyEvent.RESOLVED, "", NotificationState.QUEUED, now)
        elif grew and opened.state == NotificationState.SENT and not is_held:
            state = NotificationState.RATE_LIMITED if _too_soon(incident, channel, now) else NotificationState.QUEUED
            due += _record(incident, channel, NotifyEvent.UPDATED, now.isoformat(), state, now)
    return due


def _record(incident, channel, event, key, state, now) -> list[int]:
    notification, created = Notification.objects.get_or_create(
        incident=incident, channel=channel, event=event, key=key,
        defaults={"state": state, "created_at": now, "next_try_at": now if state == NotificationState.QUEUED else None},
    )
    return [notification.pk] if created and state == NotificationState.QUEUED else []


def _too_soon(incident, channel, now) -> bool:
    window = timedelta(minutes=settings.NOTIFY_REPEAT_MINUTES)
    return Notification.objects.filter(
        incident=incident, channel=channel, created_at__gt=now - window,
        state__in=[NotificationState.QUEUED, NotificationState.SENDING, NotificationState.SENT],
    ).exists()


# --- the message ---------------------------------------------------------------------------------------------

def run_url(run, metric="", component="", step=None) -> str:
    params = {k: v for k, v in (("metric", metric), ("component", component)) if v}
    if step is not None:
        params |= {"start": max(0, step - RUN_LINK_STEPS), "end": step + RUN_LINK_STEPS}
    return settings.CONSOLE_URL + reverse("console:run", args=[run.run_id]) + ("?" + urlencode(params) if params else "")


def incident_url(incident, project) -> str:
    query = urlencode({"state": "all", "project": project.slug})
    return f"{settings.CONSOLE_URL}{reverse('console:inbox')}?{query}#incident-{incident.pk}"


def message_for(incident, event: str) -> IncidentMessage:
    """The incident as a channel is told of it (`run__project` and `origin__rule` loaded or loadable)."""
    origin = incident.origin
    if origin is None:
        raise ValueError(f"incident {incident.pk} has no origin alert left")
    rule, run = origin.rule, incident.run
    project = run.project
    count = Alert.objects.filter(incident=incident).count()
    where = origin.component or "the whole run"
    summary = (f"{rule.name} on run {run.run_id}, {where}, at step {origin.first_step} "
               f"({count} alert{'s' if count != 1 else ''}; origin {describe_origin(origin)})")
    if event == NotifyEvent.RESOLVED:
        summary = "Resolved: " + summary
    labels = {"run": run.run_id, "rule": rule.name, "severity": incident.severity, "project": project.slug,
              "incident": str(incident.pk)}
    if origin.component:
        labels["component"] = origin.component
    return IncidentMessage(
        event=str(event), incident_id=incident.pk, project=project.slug, run_id=run.run_id, run_pk=run.pk,
        run_tags=dict(run.tags or {}), rule=rule.name, rule_kind=rule.kind, severity=incident.severity,
        component=origin.component, metric=origin.metric, step=origin.first_step, magnitude=origin.magnitude,
        magnitude_unit=origin.magnitude_unit, owner=rule.owner, runbook_url=rule.diagnostic_url,
        run_url=run_url(run, origin.metric, origin.component, origin.first_step),
        incident_url=incident_url(incident, project), alerts=count, opened_at=incident.opened_at,
        resolved_at=(incident.resolved_at or timezone.now()) if event == NotifyEvent.RESOLVED else None, summary=summary, labels=labels,
    )


def target_of(channel: Channel) -> ChannelTarget:
    return ChannelTarget(kind=channel.kind, url=channel.url, secret=channel.secret, config=dict(channel.config or {}),
                         timeout=float(settings.NOTIFY_TIMEOUT_SECONDS))
