"""The embedded console as bin/run starts it (no Redis, no beat process) keeps a still-firing incident alive in the
team's Alertmanager: the serving process's own beat (opsconsole/beat.py) pushes it again before the `endsAt` of the
last push passes, as `celery beat` and a worker do in production.

The refresh interval is made short (NOTIFY_ALERTMANAGER_REFRESH_SECONDS=10: `endsAt` 30 s ahead, a push again after
10 s, found by a sweep every 5 s); the receiver is a local HTTP server standing in for Alertmanager's /api/v2/alerts.
"""
import datetime as dt
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.notify_support import Receiver
from tests.test_bin_run import ROOT, SCRUBBED, BinRun, free_port

FAST = {"NOTIFY_ALLOWED_NETWORKS": "127.0.0.1/32",  # the stand-in Alertmanager listens on loopback
        "NOTIFY_ALERTMANAGER_REFRESH_SECONDS": "10", "NOTIFY_SWEEP_SECONDS": "5"}

SETUP = """
from ingest.models import Project
from tests.notify_support import make_channel, spike_rule
project = Project.objects.get(slug="demo")
spike_rule(project, name="grad-spike")
make_channel(project, kind="alertmanager", url={url!r}, name="team-alertmanager")
"""


@pytest.fixture
def alertmanager():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def embedded(tmp_path):
    run = BinRun(tmp_path / "var", free_port(), **FAST)
    try:
        run.wait_for("Console: ")
        yield run
    finally:
        run.stop()


def manage(run, code):
    """Django's shell on the running console's own database (as an operator would reach it)."""
    environ = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    environ.update(WL_VAR_DIR=str(run.var), SECRET_KEY=(run.var / "secret_key").read_text().strip(), DEBUG="0",
                   ALLOWED_HOSTS="127.0.0.1", **FAST)
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def ingest(run, body):
    token = (run.var / "demo-token.txt").read_text().strip()
    request = urllib.request.Request(f"{run.url}/api/v1/ingest", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202


def pushes(receiver):
    """(time received, the alert) for each push of the incident."""
    return [(r["at"], alert) for r in receiver.requests for alert in json.loads(r["body"])
            if alert["labels"].get("alertname") == "grad-spike"]


def wait_for(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def parse(stamp):
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_a_still_firing_incident_is_pushed_again_before_alertmanager_would_resolve_it(embedded, alertmanager):
    received = alertmanager.requests

    class Stamped(list):
        def append(self, item):
            super().append({**item, "at": dt.datetime.now(dt.timezone.utc)})

    alertmanager.requests = Stamped(received)
    manage(embedded, SETUP.format(url=alertmanager.url))

    points = [{"step": 100, "metric": "grad_norm", "component": c, "value": 50.0 if c == "layers.1" else 1.0}
              for c in ("layers.0", "layers.1")]
    ingest(embedded, {"run": {"id": "still-firing"}, "points": points})
    assert wait_for(lambda: pushes(alertmanager), 20), embedded.output
    first_at, first = pushes(alertmanager)[0]
    first_end = parse(first["endsAt"])
    assert first_end - first_at > dt.timedelta(seconds=20)  # endsAt 3 × 10 s ahead

    # Nothing else is sent to the console: only its own beat can push the incident again.
    assert wait_for(lambda: len(pushes(alertmanager)) >= 2, 40), f"no refresh:\n{embedded.output}"
    again_at, again = pushes(alertmanager)[1]
    assert again_at < first_end  # before Alertmanager would have resolved it
    assert parse(again["endsAt"]) > first_end
    assert again["labels"] == first["labels"]  # the same alert in Alertmanager, kept alive
    assert again["startsAt"] == first["startsAt"]
    assert "embedded beat" not in embedded.output  # no task of the schedule failed on the way
