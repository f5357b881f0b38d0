"""Prometheus Alertmanager's webhook: each alert becomes a system-layer event; resolved closes it."""
from datetime import datetime, timezone

import pytest

from ingest.models import Event

pytestmark = pytest.mark.django_db


def payload(status="firing", labels=None, fingerprint="fp1", ends="0001-01-01T00:00:00Z"):
    return {
        "version": "4",
        "status": status,
        "receiver": "warning-light",
        "groupKey": "{}:{}",
        "alerts": [
            {
                "status": status,
                "labels": labels or {"alertname": "GpuXidError", "run": "llama-ft-7", "gpu": "node3/gpu5", "condition": "dead"},
                "annotations": {"summary": "XID 79 on GPU 5"},
                "startsAt": "2026-11-29T10:00:00Z",
                "endsAt": ends,
                "generatorURL": "http://prometheus/graph",
                "fingerprint": fingerprint,
            }
        ],
    }


def post(api, token, body):
    return api.post("/api/v1/alertmanager", body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_firing_alert_becomes_a_system_event_on_the_labelled_run_and_resolved_closes_it(api, token):
    assert post(api, token, payload()).status_code == 202
    event = Event.objects.get()
    assert (event.run.run_id, event.layer, event.component, event.condition, event.source) == (
        "llama-ft-7", "system", "node3/gpu5", "dead", "alertmanager")
    assert event.ended_at is None
    assert post(api, token, payload()).status_code == 202  # a repeat notification is not a second event
    assert Event.objects.count() == 1
    assert post(api, token, payload(status="resolved", ends="2026-11-29T10:05:00Z")).status_code == 202
    event.refresh_from_db()
    assert event.ended_at == datetime(2026, 11, 29, 10, 5, tzinfo=timezone.utc).timestamp()


def test_alert_without_a_run_label_goes_to_the_projects_unassigned_run(api, token, project):
    post(api, token, payload(labels={"alertname": "NodeDown", "instance": "node7:9100"}))
    event = Event.objects.get()
    assert event.run.run_id == f"{project.slug}/unassigned"
    assert event.component == "node7:9100" and event.condition == "unclassified"


def test_needs_a_token(api):
    assert api.post("/api/v1/alertmanager", payload(), format="json").status_code == 401
