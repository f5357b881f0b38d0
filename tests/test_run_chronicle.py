"""A run's chronicle: each restart with its cause (hardware, numeric alert, planned/manual, unknown), and the
effective training time per attempt (steps kept versus computed after a rewind, time from the points' own times)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import Run
from reviews.chronicle import CAUSE_WINDOW_STEPS, Cause, attempts, chronicle, effective_time
from reviews.models import LogEntry
from tests.alertmanager_support import am_alert, notification
from tests.factories import OWNER, make_rule

pytestmark = pytest.mark.django_db

T0 = 1_764_400_000.0


def send(sender, run_id, steps, *, restart=False, nan_at=None, seconds_per_step=None):
    steps = list(steps)
    points = []
    for s in steps:
        point = {"step": s, "metric": "loss", "value": "NaN" if s == nan_at else 2.0 - s / 1000}
        if seconds_per_step is not None:
            point["time"] = T0 + s * seconds_per_step
        points.append(point)
    body = {"run": {"id": run_id}, "points": points}
    if restart:
        body["phases"] = [{"step": steps[0], "phase": "restart"}]
    response = sender.post(body)
    assert response.status_code == 202, response.content


def second_attempt(run_id):
    rows = attempts(Run.objects.get(run_id=run_id))
    assert [r["number"] for r in rows] == [1, 2]
    return rows[1]


def test_a_restart_after_an_alertmanager_hardware_event_is_caused_by_hardware(sender, webhook):
    send(sender, "hw", range(0, 51))
    starts = (timezone.now() - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert webhook.post(notification(am_alert(starts=starts, alertname="GpuXidError", run="hw", gpu="5", step="50"))).status_code == 202
    send(sender, "hw", range(41, 61), restart=True)
    row = second_attempt("hw")
    assert row["cause"] == Cause.HARDWARE
    [event] = row["evidence"][Cause.HARDWARE]
    assert event["source"] == "alertmanager" and event["step"] == 50
    assert row["is_rewind"] and (row["previous_max_step"], row["start_step"]) == (50, 41)


def test_a_restart_after_a_numeric_alert_is_caused_by_that_alert(sender, project):
    make_rule(project, "loss-nonfinite", kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3})
    send(sender, "nan", range(0, 51), nan_at=48)
    send(sender, "nan", range(41, 61), restart=True)
    row = second_attempt("nan")
    assert row["cause"] == Cause.NUMERIC
    assert [a["rule"] for a in row["evidence"][Cause.NUMERIC]] == ["loss-nonfinite"]
    titles = [e["title"] for e in chronicle(Run.objects.get(run_id="nan")) if e["kind"] == "rewind"]
    assert titles == ["Attempt 2: rewind from step 50 to 41; cause: numeric alert (loss-nonfinite)"]


def test_a_restart_after_a_terminate_decision_is_planned(sender, project, owner):
    send(sender, "stop", range(0, 51))
    run = Run.objects.get(run_id="stop")
    LogEntry.objects.create(project=project, run=run, decision="terminate", observation="loss flat for 5k steps",
                            explanations=["lr too low"], owner=OWNER, author=owner, at=timezone.now(), step=50,
                            artifacts_preserved=True, last_checkpoint_step=50)
    send(sender, "stop", range(51, 61), restart=True)
    row = second_attempt("stop")
    assert row["cause"] == Cause.PLANNED and not row["is_rewind"]
    assert row["evidence"][Cause.PLANNED][0]["decision"] == "terminate"


def test_a_continue_decision_an_old_alert_and_an_old_event_leave_the_cause_unknown(sender, project, owner, webhook):
    make_rule(project, "loss-nonfinite", kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3})
    last = 10 + CAUSE_WINDOW_STEPS + 50
    send(sender, "quiet", range(0, last + 1), nan_at=10)  # an alert far before the end of the attempt
    hour_ago = (timezone.now() - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert webhook.post(notification(am_alert(starts=hour_ago, alertname="GpuXidError", run="quiet", gpu="1", step="3"))).status_code == 202
    run = Run.objects.get(run_id="quiet")
    LogEntry.objects.create(project=project, run=run, decision="continue", observation="all fine", explanations=["noise"],
                            owner=OWNER, author=owner, at=timezone.now(), step=last)
    send(sender, "quiet", range(last - 5, last + 20), restart=True)
    row = second_attempt("quiet")
    assert row["cause"] == Cause.UNKNOWN and row["evidence"] == {}


def test_effective_time_counts_rewound_steps_as_computed_but_not_kept(sender):
    send(sender, "eff", range(0, 100), seconds_per_step=2.0)  # attempt 1: 0-99
    send(sender, "eff", range(80, 151), restart=True, seconds_per_step=2.0)  # attempt 2 rewinds 80-99
    send(sender, "eff", range(151, 201), restart=True, seconds_per_step=2.0)  # attempt 3, no rewind
    run = Run.objects.get(run_id="eff")
    rows = attempts(run)
    assert [(r["first_step"], r["last_step"]) for r in rows] == [(0, 99), (80, 150), (151, 200)]
    assert [(r["steps_computed"], r["steps_kept"]) for r in rows] == [(100, 80), (71, 71), (50, 50)]
    assert [r["seconds"] for r in rows] == [198.0, 140.0, 98.0]  # first to last point, by the points' own times
    assert [r["rewound_steps"] for r in rows] == [0, 20, 0]
    total = effective_time(rows)
    assert (total["steps_computed"], total["steps_kept"], total["steps_redone"]) == (221, 201, 20)
    assert total["share_kept"] == pytest.approx(201 / 221)


def test_the_chronicle_is_in_time_order_with_every_kind_of_entry(sender, project, owner):
    rule = make_rule(project, "loss-nonfinite", kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3})
    send(sender, "all", range(0, 30), nan_at=20)
    run = Run.objects.get(run_id="all")
    from alerts.models import Alert, Mute

    alert = Alert.objects.get(run=run)
    Mute.objects.create(project=project, scope="run", rule=rule, run=run, reason="known bad shard", created_by=owner,
                        created_at=timezone.now(), expires_at=timezone.now() + timedelta(hours=1))
    LogEntry.objects.create(project=project, run=run, decision="intervene", observation="NaN at 20", explanations=["bad batch", "fp16 overflow"],
                            action="skip the shard", owner=OWNER, author=owner, at=timezone.now(), step=29,
                            links={"alerts": [alert.pk]})
    sender.post({"run": {"id": "all", "code_rev": "abc123"}, "points": [{"step": 30, "metric": "loss", "value": 1.0}]})
    sender.post({"run": {"id": "all", "code_rev": "def456"}, "points": [{"step": 31, "metric": "loss", "value": 1.0}]})
    send(sender, "all", range(25, 40), restart=True)
    entries = chronicle(run)
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    kinds = [e["kind"] for e in entries]
    assert kinds[:2] == ["run", "attempt"]
    for kind in ("alert.fired", "incident.opened", "mute", "decision", "identity", "rewind"):
        assert kind in kinds, kind
    assert kinds.index("decision") < kinds.index("identity") < kinds.index("rewind")
    rewind = next(e for e in entries if e["kind"] == "rewind")
    assert rewind["detail"]["cause"] == Cause.PLANNED and rewind["step"] == 25
    identity = next(e for e in entries if e["kind"] == "identity")
    assert identity["detail"] == {"field": "code_rev", "old": "abc123", "new": "def456"} and identity["step"] == 31
    for entry in entries:
        assert set(entry) == {"at", "step", "kind", "title", "detail", "link"}
