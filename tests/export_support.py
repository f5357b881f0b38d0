"""A project with one of each record the JSONL export writes, on two runs, and another project's run beside it."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts import triage
from alerts.incidents import group_new_alerts
from alerts.models import Alert
from ingest.models import Event, Run
from reviews.lifecycle import write_entry
from tests.factories import make_alert, make_rule


def strict_lines(body: bytes) -> list[dict]:
    """Each line as JSON, refusing the bare NaN / Infinity that Python's json would otherwise accept."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    assert body.endswith(b"\n")
    return [json.loads(line, parse_constant=refuse) for line in body.decode().splitlines()]


def body_of(response) -> bytes:
    assert response.status_code == 200, getattr(response, "content", b"")
    return b"".join(response.streaming_content)


@pytest.fixture
def exported(sender, other_token, project, owner):
    """Run `exp-a` (an event with a NaN magnitude, one with 3.5; two alerts grouped into one incident; a decision),
    run `exp/b` (an event, a decision written a day earlier), and `hidden` of another project with the same."""
    events = [{"step": 7, "component": "gpu0", "condition": "dead", "magnitude": 0.0, "time": 1_764_000_000.5},
              {"step": 9, "component": "layers.2", "condition": "exploding", "magnitude": 3.5, "time": 1_764_000_100.0}]
    assert sender.post({"run": {"id": "exp-a"}, "events": events}).status_code == 202
    assert sender.post({"run": {"id": "exp/b"}, "events": [{"step": 1, "component": "gpu1", "condition": "dead",
                                                             "magnitude": 1.0, "time": 1_763_999_000.0}]}).status_code == 202
    assert sender.post({"run": {"id": "hidden"}, "events": events}, token=other_token).status_code == 202
    Event.objects.filter(run__run_id="exp-a", step=7).update(magnitude=None)  # how a NaN magnitude is stored
    rule = make_rule(project, kind="nonfinite")
    run = Run.objects.get(run_id="exp-a")
    Alert.objects.filter(run__run_id__in=["exp-a", "exp/b"]).delete()  # only the alerts below, whatever the starter rules made
    first = make_alert(rule, run=run, component="layers.4", first_step=10, magnitude=float("inf"))
    second = make_alert(rule, run=run, component="layers.5", first_step=12, magnitude=2.0)
    triage.acknowledge(second, owner)
    group_new_alerts(run)
    now = timezone.now()
    write_entry(Run.objects.get(run_id="exp/b"), by=owner, observation="restart after node loss", explanations=["node failure"],
                owner="Alice", now=now - timedelta(days=1))
    write_entry(run, by=owner, observation="nan in layers.4", explanations=["bad batch", "lr too high"], owner="Bob", now=now)
    write_entry(Run.objects.get(run_id="hidden"), by=None, observation="other team's note", explanations=["x"], owner="Vision")
    return {"alerts": [first.pk, second.pk]}
