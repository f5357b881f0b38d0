"""A gradient gone infinite still reaches the team: the incident is sent with its component and step, in strict
JSON (no bare NaN or Infinity a receiver's parser would refuse), to the webhook and to Slack."""
import json

from notifications.senders import email, json_bytes, slack, webhook
from tests.mlflow_support import incident_message
from tests.notify_support import make_channel, post_points, spike_rule


def strict(text):
    return json.loads(text, parse_constant=lambda word: (_ for _ in ()).throw(ValueError(f"bare {word}")))


def test_an_infinite_gradient_is_sent_in_strict_json(project, sender, receiver):
    spike_rule(project)  # grad_norm above 10
    make_channel(project, url=receiver.url)
    make_channel(project, kind="slack", name="team-slack", url=receiver.url + "/slack")

    post_points(sender, "run-n", [{"step": 100, "metric": "grad_norm", "component": "layers.1", "value": "Infinity"}])

    bodies = {r["path"]: r["body"].decode() for r in receiver.requests}
    webhook = strict(bodies["/"])
    assert (webhook["event"], webhook["component"], webhook["step"], webhook["metric"]) == ("opened", "layers.1", 100, "grad_norm")
    assert webhook["magnitude"] is None  # a threshold alert on an infinite value records no magnitude
    assert "layers.1" in strict(bodies["/slack"])["text"]


def test_a_non_finite_magnitude_is_the_contracts_word_in_every_body():
    message = incident_message(magnitude=float("inf"), magnitude_unit="×")
    assert strict(json_bytes(webhook.body_of(message)))["magnitude"] == "Infinity"
    assert "Infinity ×" in json_bytes(slack.body_of(message)).decode()
    assert "Magnitude:  NaN" in email.body_of(incident_message(magnitude=float("nan"), magnitude_unit=""))
