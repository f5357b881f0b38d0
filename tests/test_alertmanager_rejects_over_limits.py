"""The Alertmanager webhook takes the ingest contract's limits: 10,000 items and 4 MiB per request, else 413.

Before: there was no item cap (20,000 alerts in one request were taken, in 43 s).
"""
import orjson
import pytest

from ingest.contract import MAX_BODY_BYTES, MAX_ITEMS
from ingest.models import Event
from tests.alertmanager_support import notification
from tests.conftest import stored_counts

pytestmark = pytest.mark.django_db


def small_alert(i):
    return {"status": "firing", "labels": {"alertname": "NodeDown", "run": "big-run", "instance": f"n{i}"},
            "annotations": {}, "startsAt": "2026-11-29T10:00:00Z", "fingerprint": f"{i:016x}"}


def test_more_alerts_than_the_contract_allows_is_a_413_and_stores_nothing(webhook):
    before = stored_counts()
    response = webhook.post(notification(*(small_alert(i) for i in range(MAX_ITEMS + 1))))
    assert response.status_code == 413
    [error] = response.json()["errors"]
    assert error["path"] == "alerts" and f"{MAX_ITEMS + 1} alerts" in error["message"] and str(MAX_ITEMS) in error["message"]
    assert stored_counts() == before


def test_the_limit_itself_is_accepted(webhook):
    response = webhook.post(notification(*(small_alert(i) for i in range(MAX_ITEMS))))
    assert response.status_code == 202, response.content[:300]
    assert response.json()["accepted"]["events"] == MAX_ITEMS == Event.objects.count()


def test_a_body_over_4_mib_is_a_413(webhook):
    body = notification(small_alert(0))
    body["alerts"][0]["annotations"] = {"description": "x" * MAX_BODY_BYTES}
    response = webhook.post(orjson.dumps(body))
    assert response.status_code == 413
    assert "4 MiB" in response.json()["errors"][0]["message"]
    assert Event.objects.count() == 0
