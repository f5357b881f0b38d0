"""The generic webhook: the incident as JSON, signed with HMAC-SHA256 over "<timestamp>.<body>" (docs/notifications.md)."""
import hashlib
import hmac
import time

from notifications.message import ChannelTarget, DeliveryOutcome, IncidentMessage
from notifications.senders import json_bytes, message_json, post

VERSION = "1"
TIMESTAMP_HEADER = "X-WarningLight-Timestamp"
SIGNATURE_HEADER = "X-WarningLight-Signature"


def body_of(message: IncidentMessage) -> dict:
    return {"version": VERSION, **message_json(message)}


def signature(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def send(target: ChannelTarget, message: IncidentMessage) -> DeliveryOutcome:
    body = json_bytes(body_of(message))
    timestamp = str(int(time.time()))
    headers = {TIMESTAMP_HEADER: timestamp}
    if target.secret:
        headers[SIGNATURE_HEADER] = signature(target.secret, timestamp, body)
    return post(target.url, body, timeout=target.timeout, headers=headers)
