"""A resolved notification from Alertmanager ends the console's alert once none of its events is still open.

Before: the event got its end, but the alert it fired stayed `firing` and the
run `alerting` forever; the events API showed neither the end nor the source.
"""
import pytest

from alerts.models import Alert, AlertChange
from ingest.models import BatchReceipt, Event
from tests.alertmanager_support import am_alert, change_kinds, notification

pytestmark = pytest.mark.django_db

GPU5 = {"alertname": "GpuXidError", "run": "llama-ft-7", "instance": "node3:9400", "gpu": "5", "condition": "dead"}
HOT5 = {"alertname": "GpuTooHot", "run": "llama-ft-7", "instance": "node3:9400", "gpu": "5", "condition": "saturated"}
RESOLVED_AT = "2026-11-29T10:05:00Z"


def status(webhook, run_id="llama-ft-7"):
    return webhook.get(f"/api/v1/runs/{run_id}/")["status"]


def history():
    return AlertChange.objects.count(), Event.objects.count(), BatchReceipt.objects.count()


def test_resolved_notification_resolves_the_alert_once_and_the_run_follows(webhook, starter_pack):
    assert webhook.post(notification(am_alert(**GPU5))).status_code == 202
    [alert] = webhook.alerts("llama-ft-7")
    assert alert["state"] == "firing" and alert["rule"]["name"] == "job-health-events"
    assert status(webhook) == "alerting"

    assert webhook.post(notification(am_alert("resolved", ends=RESOLVED_AT, **GPU5))).status_code == 202
    [alert] = webhook.alerts("llama-ft-7")
    assert alert["state"] == "resolved"
    assert change_kinds(alert["id"]) == ["fired", "resolved"]
    assert status(webhook) == "healthy"
    [event] = webhook.events("llama-ft-7")
    assert event["source"] == "alertmanager" and event["ended_at"] == 1795946700.0  # 2026-11-29T10:05:00Z

    before = history()
    for _ in range(2):  # Alertmanager sends a resolved alert again with its group's later notifications
        assert webhook.post(notification(am_alert("resolved", ends=RESOLVED_AT, **GPU5))).status_code == 202
    assert history() == before
    assert webhook.alerts("llama-ft-7")[0]["state"] == "resolved" and status(webhook) == "healthy"


def test_the_alert_stays_while_another_event_of_its_component_is_open(webhook, starter_pack):
    webhook.post(notification(am_alert(fingerprint="xid", **GPU5), am_alert(fingerprint="hot", **HOT5)))
    [alert] = webhook.alerts("llama-ft-7")  # one open alert per (rule, run, component)
    assert alert["component"] == "node3:9400/gpu5"

    webhook.post(notification(am_alert("resolved", fingerprint="xid", ends=RESOLVED_AT, **GPU5), am_alert(fingerprint="hot", **HOT5)))
    assert webhook.alerts("llama-ft-7")[0]["state"] == "firing"
    assert status(webhook) == "alerting"
    assert [e["ended_at"] is None for e in webhook.events("llama-ft-7")] == [False, True]

    webhook.post(notification(am_alert("resolved", fingerprint="hot", ends=RESOLVED_AT, **HOT5)))
    assert webhook.alerts("llama-ft-7")[0]["state"] == "resolved"
    assert change_kinds(alert["id"]) == ["fired", "resolved"]
    assert status(webhook) == "healthy"


def test_a_job_event_on_the_component_does_not_hold_the_alert_open(webhook, starter_pack, sender):
    # Job-reported events are instants, not open incidents: only Alertmanager's own open alerts keep it.
    webhook.post(notification(am_alert(**GPU5)))
    response = sender.post({"run": {"id": "llama-ft-7"}, "events": [
        {"step": 3, "component": "node3:9400/gpu5", "condition": "exploding", "magnitude": 2.0}]})
    assert response.status_code == 202, response.content
    webhook.post(notification(am_alert("resolved", ends=RESOLVED_AT, **GPU5)))
    assert [a["state"] for a in webhook.alerts("llama-ft-7")] == ["resolved"]


def test_a_resolved_alert_never_seen_firing_is_recorded_as_fired_and_resolved(webhook, starter_pack):
    # The console was down while it fired: the incident is still history, and the run is not left alerting.
    assert webhook.post(notification(am_alert("resolved", ends=RESOLVED_AT, **GPU5))).status_code == 202
    [alert] = webhook.alerts("llama-ft-7")
    assert change_kinds(alert["id"]) == ["fired", "resolved"]
    assert status(webhook) == "healthy"


def test_a_late_repeat_of_the_firing_does_not_reopen_it_but_a_new_incident_does(webhook, starter_pack):
    webhook.post(notification(am_alert(**GPU5)))
    webhook.post(notification(am_alert("resolved", ends=RESOLVED_AT, **GPU5)))
    before = history()
    webhook.post(notification(am_alert(**GPU5)))  # same fingerprint and start: the incident that just ended
    assert history() == before

    webhook.post(notification(am_alert(starts="2026-11-29T11:00:00Z", **GPU5)))  # fires again later: a new incident
    assert [a["state"] for a in webhook.alerts("llama-ft-7")] == ["resolved", "firing"]
    assert [e["ended_at"] is None for e in webhook.events("llama-ft-7")] == [False, True]
    assert Alert.objects.filter(state="firing").count() == 1 and status(webhook) == "alerting"
