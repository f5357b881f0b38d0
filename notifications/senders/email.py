"""Email through Django's configured backend (EMAIL_BACKEND), to the channel's `recipients`."""
import smtplib

from django.core.mail import get_connection, send_mail

from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage
from notifications.senders import finite


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
    # Fixed reasons, never the exception's text: it quotes the mail server's answer, which may echo the message
    # or the login, into a log every member of the project reads.
    except smtplib.SMTPRecipientsRefused:  # refused for good: no retry
        return DeliveryOutcome(ok=False, detail="the mail server refused the recipients")
    except smtplib.SMTPSenderRefused:
        return DeliveryOutcome(ok=False, detail="the mail server refused the sender address")
    except smtplib.SMTPAuthenticationError:
        return DeliveryOutcome(ok=False, retry=True, detail="the mail server refused the console's login")
    except smtplib.SMTPResponseException as exc:  # the code is the server's, a number
        return DeliveryOutcome(ok=False, retry=True, detail=f"the mail server answered {int(exc.smtp_code)}")
    except TimeoutError:
        return DeliveryOutcome(ok=False, retry=True, detail=f"no answer from the mail server within {target.timeout:g} s")
    except ConnectionRefusedError:
        return DeliveryOutcome(ok=False, retry=True, detail="the mail server refused the connection")
    except OSError:  # the mail server is down or failed for now (smtplib's errors included): try again later
        return DeliveryOutcome(ok=False, retry=True, detail="the mail server could not be reached")
    return DeliveryOutcome(ok=True, detail=f"to {len(recipients)} recipient{'s' if len(recipients) != 1 else ''}")
