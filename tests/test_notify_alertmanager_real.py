"""Debian's real `prometheus-alertmanager` receives a project's incidents: pushed while firing, with the labels a
team routes, silences and pages on; pushed again before Alertmanager would time it out; resolved when it ends.

Alertmanager runs as its own process with a config of one receiver that sends nothing (the team's routing is
not under test); the test reads its own API, `GET /api/v2/alerts`, as amtool does. Under CI a missing binary
fails this test instead of skipping it (`bin/test` installs the package).
"""
import datetime as dt

import pytest
import yaml

from notifications import tasks
from notifications.models import Delivery, Notification
from tests.notify_support import calm, fire, make_channel, spike_rule
from tests.process_support import running_alertmanager


@pytest.fixture
def team_alertmanager(tmp_path):
    config = {"route": {"receiver": "team"}, "receivers": [{"name": "team"}]}
    with running_alertmanager(yaml.safe_dump(config), tmp_path) as client:
        yield client


def alerts_of(alertmanager, run_id):
    answer = alertmanager.get("/api/v2/alerts")
    assert answer.status_code == 200, answer.text
    return [a for a in answer.json() if a["labels"].get("run") == run_id]


def test_incidents_are_pushed_renewed_and_resolved(project, sender, team_alertmanager, settings):
    settings.CONSOLE_URL = "https://console.example"
    spike_rule(project)
    channel = make_channel(project, kind="alertmanager", url=str(team_alertmanager.base_url),
                           config={"labels": {"team": "pretrain-oncall"}})

    fire(sender, run_id="run-n", step=100, high=("layers.1", "layers.2"))
    [alert] = alerts_of(team_alertmanager, "run-n")  # two alerts of the console, one incident, one Alertmanager alert
    labels = alert["labels"]
    assert {k: labels[k] for k in ("alertname", "run", "component", "rule", "severity", "project", "team")} == {
        "alertname": "grad-high", "run": "run-n", "component": "layers.1", "rule": "grad-high", "severity": "notify",
        "project": "pretrain", "team": "pretrain-oncall"}
    assert alert["status"]["state"] == "active"
    assert alert["annotations"]["runbook_url"] == "https://runbooks.example/grad-high"
    assert alert["annotations"]["step"] == "100"
    assert alert["generatorURL"].startswith("https://console.example/runs/run-n/?")
    first_end = dt.datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00"))
    assert first_end > dt.datetime.now(dt.timezone.utc)

    # Before that end passes, the sweep pushes the firing incident again with a later one.
    Notification.objects.update(sent_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1))
    assert tasks.sweep_now()["refreshed"] == 1
    [renewed] = alerts_of(team_alertmanager, "run-n")
    assert dt.datetime.fromisoformat(renewed["endsAt"].replace("Z", "+00:00")) > first_end
    assert renewed["fingerprint"] == alert["fingerprint"]

    calm(sender, run_id="run-n", after=100)  # the incident ends: resolved in Alertmanager at once
    assert alerts_of(team_alertmanager, "run-n") == []
    assert list(Delivery.objects.filter(channel=channel).order_by("id").values_list("status", "status_code")) == [
        ("ok", 200), ("ok", 200), ("ok", 200)]
    assert tasks.sweep_now()["refreshed"] == 0  # a resolved incident is not pushed again
