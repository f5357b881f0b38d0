"""Alertmanager notifications as Alertmanager 0.25 writes them (webhook payload version 4), and posting them."""
import orjson
import pytest
from rest_framework.test import APIClient

from alerts.models import AlertChange
from alerts.starter import install_starter_pack

UNSET = "0001-01-01T00:00:00Z"  # Go's zero time: Alertmanager's "no end yet"


def am_alert(status="firing", fingerprint="fp1", starts="2026-11-29T10:00:00Z", ends=UNSET, annotations=None, **labels):
    return {
        "status": status,
        "labels": labels or {"alertname": "GpuXidError", "run": "llama-ft-7", "instance": "node3:9400", "gpu": "5"},
        "annotations": {"summary": "XID 79"} if annotations is None else annotations,
        "startsAt": starts,
        "endsAt": ends,
        "generatorURL": "http://prometheus:9090/graph",
        "fingerprint": fingerprint,
    }


def notification(*alerts):
    firing = any(a.get("status") == "firing" for a in alerts if isinstance(a, dict))
    return {
        "version": "4",
        "groupKey": '{}:{alertname="GpuXidError"}',
        "truncatedAlerts": 0,
        "status": "firing" if firing else "resolved",
        "receiver": "warning-light",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


class Webhook:
    """Posts to /api/v1/alertmanager as Alertmanager does, with the after-commit work (evaluation) executed."""

    def __init__(self, token, capture):
        self.client = APIClient()
        self.token = token
        self.capture = capture

    def post(self, body, token=None):
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        with self.capture(execute=True):
            return self.client.generic("POST", "/api/v1/alertmanager", raw, content_type="application/json",
                                       HTTP_AUTHORIZATION=f"Bearer {token or self.token}")

    def get(self, path):
        response = self.client.get(path, HTTP_AUTHORIZATION=f"Bearer {self.token}")
        assert response.status_code == 200, response.content
        return response.json()

    def events(self, run_id):
        return self.get(f"/api/v1/runs/{run_id}/events/")["events"]

    def alerts(self, run_id):
        return self.get(f"/api/v1/alerts/?run={run_id}&limit=500")["results"]


def change_kinds(alert_id):
    return list(AlertChange.objects.filter(alert_id=alert_id).order_by("id").values_list("kind", flat=True))


@pytest.fixture
def webhook(token, django_capture_on_commit_callbacks):
    return Webhook(token, django_capture_on_commit_callbacks)


@pytest.fixture
def starter_pack(project):
    """The project's starter rules, as `issue_token` installs them (job-health-events covers Alertmanager)."""
    return install_starter_pack(project)
