"""The senders, one module per channel kind (`notifications/senders/<kind>.py`), each with

    send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome

looked up by kind and imported when first used. A sender never raises for a failed delivery: it answers with
an outcome (`retry` for what may pass: 5xx, 429, timeouts, refused connections), which the delivery task logs.
"""
import importlib
import json
import socket
import urllib.error
import urllib.request

from ingest.wire import wire_value
from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage

USER_AGENT = "WarningLight-Notifier/1"


def sender_for(kind: str):
    """The `send` function of the kind's module (ImportError for a kind that has none)."""
    return importlib.import_module(f"notifications.senders.{kind}").send


def send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome:
    try:
        return sender_for(target.kind)(target, message)
    except Exception as exc:  # a sender's own bug is a failed delivery, never an error in the caller
        return DeliveryOutcome(ok=False, retry=False, detail=short(f"{type(exc).__name__}: {exc}"))


def short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finite(value):
    """A magnitude in the API's wire form: non-finite ones as "NaN", "Infinity", "-Infinity"; None stays None."""
    return wire_value(value) if isinstance(value, float) else value


def message_json(message: IncidentMessage) -> dict:
    data = message.as_json()
    data["magnitude"] = finite(data["magnitude"])
    return data


def json_bytes(body) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def post(url: str, body: bytes, *, timeout: float, headers: dict | None = None) -> DeliveryOutcome:
    """POST a body; 2xx is ok, 5xx/429/timeouts/unreachable are worth a retry, any other answer fails at once."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": USER_AGENT, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return DeliveryOutcome(ok=True, status_code=response.status)
    except urllib.error.HTTPError as exc:
        code = exc.code
        text = exc.read(200).decode("utf-8", "replace").strip()
        return DeliveryOutcome(ok=False, retry=code >= 500 or code == 429, status_code=code,
                               detail=short(f"HTTP {code}" + (f": {text}" if text else "")))
    except (TimeoutError, socket.timeout):
        return DeliveryOutcome(ok=False, retry=True, detail=f"no answer within {timeout:g} s")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return DeliveryOutcome(ok=False, retry=True, detail=f"no answer within {timeout:g} s")
        return DeliveryOutcome(ok=False, retry=True, detail=short(f"unreachable: {reason}"))
    except (OSError, ValueError) as exc:  # a reset connection; a URL urllib cannot use
        return DeliveryOutcome(ok=False, retry=isinstance(exc, OSError), detail=short(f"{type(exc).__name__}: {exc}"))
