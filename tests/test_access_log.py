"""The served console writes one access-log line per request (method, path, status, time, bytes, client), with
credentials in the query string redacted; probes are left out unless asked for; ACCESS_LOG=0 turns it off."""
import logging

import httpx
import pytest

from tests.browser import console_server  # noqa: F401  (fixture)


@pytest.fixture
def access_lines(caplog):
    caplog.set_level(logging.INFO, logger="opsconsole.access")

    def lines():
        return [r.getMessage() for r in caplog.records if r.name == "opsconsole.access"]
    return lines


def wait_for_lines(lines, n):
    import time

    deadline = time.monotonic() + 5
    while len(lines()) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return lines()


def test_each_request_is_one_line_with_secrets_redacted(console_server, access_lines, token):  # noqa: F811
    with httpx.Client(base_url=console_server.url) as http:
        answer = http.get("/api/v1/runs/", params={"page": "2", "token": "wl_leaked-secret", "api_key": "k-leak"},
                          headers={"Authorization": f"Bearer {token}"})
        http.get("/healthz")
        http.get("/metrics")
    [line] = wait_for_lines(access_lines, 1)
    assert line.startswith(f"GET /api/v1/runs/?page=2&token=REDACTED&api_key=REDACTED {answer.status_code} ")
    assert f" {len(answer.content)}B " in line and "ms " in line and line.endswith("client=127.0.0.1")
    assert "leaked" not in line and "k-leak" not in line and token not in line


def test_probes_are_logged_when_asked_and_nothing_when_off(console_server, access_lines, settings):  # noqa: F811
    settings.ACCESS_LOG_PROBES = True
    with httpx.Client(base_url=console_server.url) as http:
        http.get("/healthz")
        [line] = wait_for_lines(access_lines, 1)
        assert line.startswith("GET /healthz 200 ") and " 3B " in line
        settings.ACCESS_LOG = False
        http.get("/healthz")
        http.get("/accounts/login/")
    assert len(wait_for_lines(access_lines, 2)) == 1
