"""Email through Django's configured backend (EMAIL_BACKEND), to the channel's `recipients`."""
import smtplib

from django.core.mail import get_connection, send_mail

from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage
from notifications.senders import finite, short


def subject_of(message: IncidentMessage) -> str:
    where = message.component or "whole run"
    return f"[Warning Light] {message.event}: {message.rule} on {message.run_id} ({where}) at step {message.step}"


def body_of(message: IncidentMessage) -> str:
    magnitude = finite(message.magnitude)
    lines = [
        message.summary, "",
        f"Run:        {message.run_id}",
        f"Component:  {message.component or 'the whole run'}",
        f"Step:       {message.step}",
        f"Magnitude:  {'—' if magnitude is None else f'{magnitude} {message.magnitude_unit}'.strip()}",
        f"Rule:       {message.rule} ({message.rule_kind}, {message.severity})",
        f"Owner:      {message.owner}",
        f"Alerts:     {message.alerts}", "",
        f"Run page at the step: {message.run_url}",
        f"Runbook:              {message.runbook_url}",
        f"Incident:             {message.incident_url}",
    ]
    return "\n".join(lines) + "\n"


def send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome:
    recipients = list(target.config.get("recipients") or [])
    try:
        send_mail(subject_of(message), body_of(message), None, recipients, fail_silently=False,
                  connection=get_connection(timeout=target.timeout))
    except (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused) as exc:  # refused for good: no retry
        return DeliveryOutcome(ok=False, detail=short(f"{type(exc).__name__}: {exc}"))
    except OSError as exc:  # the mail server is down, timed out or failed for now: try again later
        return DeliveryOutcome(ok=False, retry=True, detail=short(f"{type(exc).__name__}: {exc}"))
    return DeliveryOutcome(ok=True, detail=f"to {len(recipients)} recipient{'s' if len(recipients) != 1 else ''}")
