"""A generic webhook hears of an incident once, with a signed JSON body a receiver can check and act on."""
import hashlib
import hmac
import json
import time

from notifications.models import Delivery, Notification
from tests.notify_support import SECRET, fire, make_channel, spike_rule


def test_the_receiver_verifies_the_signature_and_reads_the_incident(project, sender, receiver, settings):
    settings.CONSOLE_URL = "https://console.example"
    spike_rule(project)
    make_channel(project, url=receiver.url + "/hook", secret=SECRET)

    fire(sender, step=100, high=("layers.1", "layers.2"))

    [request] = receiver.requests  # two alerts, one incident, one message
    headers = request["headers"]
    timestamp = headers["X-WarningLight-Timestamp"]
    assert abs(int(timestamp) - time.time()) < 60  # a receiver refuses old timestamps (replays)
    expected = "sha256=" + hmac.new(SECRET.encode(), timestamp.encode() + b"." + request["body"], hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-WarningLight-Signature"], expected)
    assert headers["Content-Type"] == "application/json"

    body = json.loads(request["body"])
    assert body["version"] == "1" and body["event"] == "opened"
    assert (body["run_id"], body["rule"], body["component"], body["metric"], body["step"]) == (
        "run-n", "grad-high", "layers.1", "grad_norm", 100)
    assert body["magnitude"] is not None and body["magnitude_unit"]
    assert body["owner"] == "Pretrain on-call <#pretrain-oncall>"
    assert body["runbook_url"] == "https://runbooks.example/grad-high"
    assert body["run_url"].startswith("https://console.example/runs/run-n/?")
    assert "metric=grad_norm" in body["run_url"] and "component=layers.1" in body["run_url"]
    assert "start=0" in body["run_url"] and "end=200" in body["run_url"]  # the step lies in the page's range
    assert body["alerts"] == 2 and body["severity"] == "notify"
    assert body["incident_url"].startswith("https://console.example/inbox/")

    [delivery] = Delivery.objects.all()
    assert (delivery.attempt, delivery.status, delivery.status_code) == (1, "ok", 200)
    assert Notification.objects.get().state == "sent"


def test_a_tampered_body_does_not_verify(project, sender, receiver):
    spike_rule(project)
    make_channel(project, url=receiver.url, secret=SECRET)
    fire(sender)
    [request] = receiver.requests
    timestamp = request["headers"]["X-WarningLight-Timestamp"]
    tampered = request["body"].replace(b'"step":100', b'"step":101')
    assert tampered != request["body"]
    forged = "sha256=" + hmac.new(SECRET.encode(), timestamp.encode() + b"." + tampered, hashlib.sha256).hexdigest()
    assert forged != request["headers"]["X-WarningLight-Signature"]
