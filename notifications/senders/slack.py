"""A Slack-compatible incoming webhook: `text` for notifications and clients without blocks, `blocks` for the rest."""
from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage
from notifications.senders import finite, json_bytes, post

HEADLINE = {"opened": ":rotating_light: Incident opened", "updated": ":warning: Incident grew",
            "resolved": ":white_check_mark: Incident resolved", "test": ":bell: Test message"}


def _escape(text) -> str:
    # Slack's mrkdwn reads these three as markup.
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def body_of(message: IncidentMessage) -> dict:
    headline = HEADLINE.get(message.event, message.event)
    magnitude = finite(message.magnitude)
    where = message.component or "the whole run"
    text = (f"{headline}: {message.rule} on {message.run_id} ({where}) at step {message.step}"
            f" — {message.summary} <{message.run_url}|run page>")
    fields = [
        ("Run", f"<{message.run_url}|{_escape(message.run_id)}>"),
        ("Component", _escape(where)),
        ("Step", str(message.step)),
        ("Magnitude", "—" if magnitude is None else _escape(f"{magnitude} {message.magnitude_unit}".strip())),
        ("Owner", _escape(message.owner)),
        ("Rule", f"{_escape(message.rule)} ({message.severity})"),
    ]
    links = f"<{message.runbook_url}|Runbook> · <{message.run_url}|Run at step {message.step}> · <{message.incident_url}|Incident>"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{headline}*: {_escape(message.summary)}"}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": f"*{k}*\n{v}"} for k, v in fields]},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": links}]},
        ],
    }


def send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome:
    return post(target.url, json_bytes(body_of(message)), timeout=target.timeout)
