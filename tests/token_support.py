"""Sending tokens from one address, for the throttle's tests (tests/test_bad_token_throttle.py,
tests/test_valid_tokens_are_never_locked_out.py)."""
import secrets

from django.conf import settings
from rest_framework.test import APIClient

from ingest.models import TOKEN_PREFIX


def guess(prefix=TOKEN_PREFIX):
    return prefix + secrets.token_urlsafe(32)


def batch(run_id):
    return {"run": {"id": run_id}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]}


def ingest(token, address, run_id):
    return APIClient().post("/api/v1/ingest", batch(run_id), format="json", HTTP_AUTHORIZATION=f"Bearer {token}",
                            REMOTE_ADDR=address)


def read(token, address):
    return APIClient().get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=address)


def assert_throttled(response):
    assert response.status_code == 429, response.content
    assert 0 < int(response["Retry-After"]) <= settings.AUTH_FAILURE_WINDOW_SECONDS
    [error] = response.json()["errors"]
    assert error["path"] == "Authorization" and "too many" in error["message"]
