"""Debian's real `prometheus-alertmanager` (0.25) delivering to a live console: firing, repeat and resolved.

Alertmanager runs as its own process with the docs' `alertmanager.yml`
(webhook at the console's `/api/v1/alertmanager`, bearer token from a file,
send_resolved), its address, token file and timers swapped in; alerts are
posted to its own `/api/v2/alerts`, as Prometheus does. `bin/test` installs
the package when it is missing; under CI a missing binary fails this test
instead of skipping it.
"""
import datetime as dt
import re
from pathlib import Path

import httpx
import pytest
import yaml

from tests.process_support import running_alertmanager, wait_for

ALERTMANAGER_DOC = Path(__file__).resolve().parent.parent / "docs" / "alertmanager.md"
GPU5 = {"alertname": "GpuXidError", "run": "llama-ft-7", "instance": "node3:9400", "gpu": "5", "condition": "dead"}
CATCH_ALL = "pretrain/unassigned"
ELSEWHERE = {"alertname": "GpuXidError", "run": "no such run!", "instance": "node4:9400", "gpu": "1", "condition": "dead"}


def documented_config(url, token_file) -> str:
    """The docs' alertmanager.yml, pointed at this console, with timers of a second so the test takes seconds."""
    section = ALERTMANAGER_DOC.read_text()
    config = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    config["route"].update(group_wait="200ms", group_interval="1s", repeat_interval="1s")
    [hook] = config["receivers"][0]["webhook_configs"]
    assert hook["url"].endswith("/api/v1/alertmanager") and hook["send_resolved"] is True
    hook["url"] = f"{url}/api/v1/alertmanager"
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return yaml.safe_dump(config)


@pytest.fixture
def alertmanager(console_server, token, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(token)
    with running_alertmanager(documented_config(console_server.url, token_file), tmp_path) as client:
        yield client


def notifications(alertmanager, name):
    """Alertmanager's own count of webhook notifications (`alertmanager_notifications_total`, `…_failed_total`)."""
    lines = alertmanager.get("/metrics").text.splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{") and 'integration="webhook"' in line)


def post_alerts(alertmanager, *alerts):
    response = alertmanager.post("/api/v2/alerts", json=list(alerts))
    assert response.status_code == 200, response.text


def now():
    return dt.datetime.now(dt.timezone.utc).isoformat()


class Console:
    """Reads the live console through its API, as a user would (the server thread owns the test database)."""

    def __init__(self, server, token):
        self.http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def get(self, path):
        response = self.http.get(path)
        assert response.status_code == 200, response.text
        return response.json()

    def alerts(self, run_id):
        return self.get(f"/api/v1/alerts/?run={run_id}&limit=500")["results"]

    def states(self, run_id):
        try:
            return [a["state"] for a in self.alerts(run_id)]
        except AssertionError:
            return None  # the run is not there yet

    def changes(self, alert_id):
        return [c["kind"] for c in self.get(f"/api/v1/alerts/{alert_id}/")["changes"]]

    def events(self, run_id):
        return self.get(f"/api/v1/runs/{run_id}/events/")["events"]

    def status(self, run_id):
        return self.get(f"/api/v1/runs/{run_id}/")["status"]


@pytest.fixture
def console(console_server, token):
    console = Console(console_server, token)
    yield console
    console.http.close()


def test_firing_repeat_and_resolved_deliveries_from_the_real_alertmanager(alertmanager, console, starter_pack):
    started = now()
    post_alerts(alertmanager, {"labels": GPU5, "annotations": {"summary": "XID 79", "value": "79"}, "startsAt": started},
                {"labels": ELSEWHERE, "startsAt": started})

    # Firing: each is an event, the one with a bad run label on the catch-all; their alerts fire.
    wait_for("the firing delivery", lambda: console.states("llama-ft-7") == ["firing"] and console.states(CATCH_ALL) == ["firing"])
    [event] = console.events("llama-ft-7")
    assert (event["source"], event["component"], event["condition"], event["magnitude"], event["ended_at"]) == (
        "alertmanager", "node3:9400/gpu5", "dead", 79.0, None)
    assert len(event["fingerprint"]) == 16  # Alertmanager's own
    assert [e["detail"]["labels"]["run"] for e in console.events(CATCH_ALL)] == ["no such run!"]
    assert console.status("llama-ft-7") == "alerting"

    # Repeats (repeat_interval): delivered and accepted, and they change nothing.
    first = notifications(alertmanager, "alertmanager_notifications_total")
    wait_for("a repeat delivery", lambda: notifications(alertmanager, "alertmanager_notifications_total") > first)
    assert len(console.events("llama-ft-7")) == 1
    [alert] = console.alerts("llama-ft-7")
    assert console.changes(alert["id"]) == ["fired"]

    # Resolved: Prometheus sends the alert again with an end; Alertmanager notifies the resolution.
    ended = now()
    post_alerts(alertmanager, {"labels": GPU5, "annotations": {"summary": "XID 79", "value": "79"}, "startsAt": started, "endsAt": ended},
                {"labels": ELSEWHERE, "startsAt": started, "endsAt": ended})
    wait_for("the resolved delivery", lambda: console.states("llama-ft-7") == ["resolved"] and console.states(CATCH_ALL) == ["resolved"])
    assert console.changes(alert["id"]) == ["fired", "resolved"]
    [event] = console.events("llama-ft-7")
    assert event["ended_at"] == pytest.approx(dt.datetime.fromisoformat(ended).timestamp(), abs=0.001)
    assert console.status("llama-ft-7") == "healthy"
    assert notifications(alertmanager, "alertmanager_notifications_failed_total") == 0
