"""Mutes: a reason and an expiry always, a scope (rule, run, component), new alerts born muted, expiry un-mutes once."""
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from alerts import triage
from alerts.models import MAX_MUTE_DURATION, Alert, AlertChange, Mute, MuteScope
from alerts.tasks import sweep_unevaluated
from ingest.models import Run
from tests.factories import make_alert, make_rule
from tests.triage_support import triage_rows

pytestmark = pytest.mark.django_db


def mute_path(alert):
    return f"/api/v1/alerts/{alert.pk}/mute/"


def iso(when):
    return when.isoformat().replace("+00:00", "Z")


@pytest.fixture
def oncall_api(api, oncall):
    api.force_login(oncall)
    return api


def expire(mute):
    """As if its time had run out (the sweep has not run yet)."""
    Mute.objects.filter(pk=mute.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


# --- the request ---------------------------------------------------------------

@pytest.mark.parametrize(
    "body, field",
    [
        ({"scope": "run", "duration_minutes": 60}, "reason"),
        ({"scope": "run", "reason": "   ", "duration_minutes": 60}, "reason"),
        ({"scope": "run", "reason": "flaky node"}, "expires_at"),
        ({"scope": "run", "reason": "flaky node", "expires_at": ""}, "expires_at"),
        ({"scope": "run", "reason": "flaky node", "expires_at": "next tuesday"}, "expires_at"),
        ({"scope": "run", "reason": "flaky node", "expires_at": "past"}, "expires_at"),
        ({"scope": "run", "reason": "flaky node", "expires_at": "beyond"}, "expires_at"),
        ({"scope": "run", "reason": "flaky node", "duration_minutes": 60, "expires_at": "soon"}, "expires_at"),
        ({"scope": "run", "reason": "flaky node", "duration_minutes": 0}, "duration_minutes"),
        ({"scope": "run", "reason": "flaky node", "duration_minutes": "an hour"}, "duration_minutes"),
        ({"scope": "run", "reason": "flaky node", "duration_minutes": 7 * 24 * 60 + 1}, "duration_minutes"),
        ({"scope": "forever", "reason": "flaky node", "duration_minutes": 60}, "scope"),
        ({"reason": "flaky node", "duration_minutes": 60}, "scope"),
    ],
)
def test_a_mute_without_a_reason_a_scope_or_a_bounded_expiry_is_a_400_naming_the_field(oncall_api, alert, body, field):
    now = timezone.now()
    special = {"past": iso(now - timedelta(minutes=1)), "beyond": iso(now + MAX_MUTE_DURATION + timedelta(minutes=5)),
               "soon": iso(now + timedelta(hours=1))}
    if body.get("expires_at") in special:
        body = {**body, "expires_at": special[body["expires_at"]]}
    response = oncall_api.post(mute_path(alert), body, format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == [field]
    assert not Mute.objects.exists() and Alert.objects.get().state == "firing" and not triage_rows().exists()


def test_every_missing_field_is_named_at_once(oncall_api, alert):
    response = oncall_api.post(mute_path(alert), {}, format="json")
    assert {e["path"] for e in response.json()["errors"]} == {"scope", "reason", "expires_at"}


def test_the_maximum_is_seven_days(oncall_api, alert):
    assert MAX_MUTE_DURATION == timedelta(days=7)
    body = {"scope": "component", "reason": "until the fix ships", "duration_minutes": 7 * 24 * 60}
    assert oncall_api.post(mute_path(alert), body, format="json").status_code == 201


def test_an_iso_expiry_is_kept_as_given(oncall_api, alert):
    until = (timezone.now() + timedelta(hours=4)).replace(microsecond=0)
    response = oncall_api.post(mute_path(alert), {"scope": "run", "reason": "flaky node", "expires_at": iso(until)}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["mute"]["scope"], body["mute"]["run"], body["mute"]["reason"], body["mute"]["active"]) == ("run", "run-a", "flaky node", True)
    assert body["mute"]["created_by"] == "omar" and body["muted"] == [alert.pk]
    assert Mute.objects.get().expires_at == until
    assert body["alert"]["state"] == "muted" and [m["id"] for m in body["alert"]["mutes"]] == [body["mute"]["id"]]


def test_a_resolved_alert_cannot_be_muted(oncall_api, rule):
    resolved = make_alert(rule, state="resolved")
    response = oncall_api.post(mute_path(resolved), {"scope": "run", "reason": "noise", "duration_minutes": 60}, format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == ["state"]
    assert not Mute.objects.exists()


def test_the_database_refuses_a_mute_without_a_reason_or_with_a_run_on_a_rule_scope(project, rule, alert):
    now = timezone.now()
    base = dict(project=project, rule=rule, expires_at=now + timedelta(hours=1), created_at=now)
    with pytest.raises(IntegrityError), transaction.atomic():
        Mute.objects.create(scope=MuteScope.RUN, run=alert.run, reason="", **base)
    with pytest.raises(IntegrityError), transaction.atomic():
        Mute.objects.create(scope=MuteScope.RULE, run=alert.run, reason="noise", **base)
    with pytest.raises(IntegrityError), transaction.atomic():
        Mute.objects.create(scope=MuteScope.RUN, run=None, reason="noise", **base)


# --- what a mute covers --------------------------------------------------------------

@pytest.fixture
def spread(rule, project):
    """The alert acted on (run-a, layers.3), and its neighbours."""
    other_rule = make_rule(project, name="grad-spike", kind="threshold")
    return {
        "acted": make_alert(rule, "run-a", "layers.3"),
        "same_run_other_component": make_alert(rule, "run-a", "layers.1"),
        "other_run": make_alert(rule, "run-b", "layers.3"),
        "other_rule": make_alert(other_rule, "run-a", "layers.3"),
        "acknowledged": make_alert(rule, "run-c", "layers.0", state="acknowledged"),
        "resolved": make_alert(rule, "run-a", "layers.2", state="resolved"),
    }


@pytest.mark.parametrize(
    "scope, muted",
    [
        ("component", {"acted"}),
        ("run", {"acted", "same_run_other_component"}),
        ("rule", {"acted", "same_run_other_component", "other_run", "acknowledged"}),
    ],
)
def test_a_mute_covers_its_scope_and_mutes_each_open_alert_with_one_row(oncall_api, oncall, spread, scope, muted):
    response = oncall_api.post(mute_path(spread["acted"]), {"scope": scope, "reason": "bad node", "duration_minutes": 60}, format="json")
    assert response.status_code == 201
    states = {name: Alert.objects.get(pk=a.pk).state for name, a in spread.items()}
    expected_unmuted = {"same_run_other_component": "firing", "other_run": "firing", "other_rule": "firing",
                        "acknowledged": "acknowledged", "resolved": "resolved"}
    assert states == {name: "muted" if name in muted else expected_unmuted[name] for name in spread}
    rows = triage_rows()
    assert sorted(rows.values_list("alert_id", flat=True)) == sorted(spread[name].pk for name in muted)
    assert all(r.kind == "muted" and r.by == oncall and r.at and "bad node" in r.note for r in rows)
    mute = Mute.objects.get()
    assert (mute.scope, mute.created_by, mute.project.slug) == (scope, oncall, "pretrain")
    assert mute.run_id == (None if scope == "rule" else spread["acted"].run_id)
    assert mute.component == ("layers.3" if scope == "component" else "")


def test_muting_an_alert_already_muted_adds_a_mute_but_no_row(oncall_api, alert):
    body = {"scope": "run", "reason": "bad node", "duration_minutes": 60}
    oncall_api.post(mute_path(alert), body, format="json")
    second = oncall_api.post(mute_path(alert), {**body, "duration_minutes": 240}, format="json")
    assert second.status_code == 201 and second.json()["muted"] == []
    assert Mute.objects.count() == 2 and triage_rows().count() == 1


# --- new alerts under a mute --------------------------------------------------------

def nan_grads(steps, bad_steps):
    return [{"step": s, "metric": "grad_norm", "component": "layers.3", "value": "NaN" if s in bad_steps else 1.0} for s in steps]


def test_a_new_alert_under_an_active_mute_is_created_muted(sender, project, owner):
    make_rule(project, persistence={"points": 1, "resolve_points": 2}, kind="nonfinite")
    sender.post({"run": {"id": "live"}, "points": nan_grads(range(0, 3), {2})})
    first = Alert.objects.select_related("rule", "run").get()
    triage.mute(first, owner, MuteScope.COMPONENT, "a known bad layer", duration_minutes=60)
    sender.post({"run": {"id": "live"}, "points": nan_grads(range(3, 6), set())})  # resolves it
    sender.post({"run": {"id": "live"}, "points": nan_grads(range(6, 9), {7})})  # fires again
    second = Alert.objects.exclude(pk=first.pk).get()
    assert second.state == "muted"
    assert list(second.changes.values_list("kind", "step")) == [("fired", 7), ("muted", 7)]
    muted_row = second.changes.get(kind="muted")
    assert muted_row.by is None and "a known bad layer" in muted_row.note and muted_row.at


def test_a_new_alert_outside_the_mute_or_after_it_expires_fires(sender, project, owner):
    make_rule(project, persistence={"points": 1, "resolve_points": 2}, kind="nonfinite")
    sender.post({"run": {"id": "live"}, "points": nan_grads(range(0, 3), {2})})
    first = Alert.objects.select_related("rule", "run").get()
    mute = triage.mute(first, owner, MuteScope.RUN, "bad node", duration_minutes=60)
    sender.post({"run": {"id": "other"}, "points": nan_grads(range(0, 3), {2})})  # another run
    assert Alert.objects.get(run__run_id="other").state == "firing"
    sender.post({"run": {"id": "live"}, "points": nan_grads(range(3, 6), set())})
    expire(mute)  # expired, but the sweep has not ended it yet: it no longer covers anything
    sender.post({"run": {"id": "live"}, "points": nan_grads(range(6, 9), {7})})
    assert Alert.objects.filter(run__run_id="live").order_by("id").last().state == "firing"


def test_a_silent_run_alert_under_a_mute_is_created_muted(sender, project, owner):
    absence = make_rule(project, name="missing-data", kind="absence", scope={"metrics": ["loss"]},
                        persistence={"points": 1})
    absence.params = {"seconds": 60}
    absence.save()
    sender.post({"run": {"id": "hung"}, "points": [{"step": s, "metric": "loss", "value": 1.0} for s in range(5)]})
    now = timezone.now()
    Mute.objects.create(project=project, rule=absence, scope=MuteScope.RULE, reason="maintenance window",
                        expires_at=now + timedelta(hours=1), created_by=owner, created_at=now)
    Run.objects.filter(run_id="hung").update(last_seen_at=now - timedelta(seconds=120))
    sweep_unevaluated()
    alert = Alert.objects.get()
    assert (alert.condition, alert.state) == ("silent", "muted")
    assert list(alert.changes.values_list("kind", flat=True)) == ["fired", "muted"]


# --- expiry ---------------------------------------------------------------------

def test_an_expired_mute_ends_and_un_mutes_its_open_alerts_exactly_once(oncall_api, spread):
    oncall_api.post(mute_path(spread["acted"]), {"scope": "run", "reason": "bad node", "duration_minutes": 60}, format="json")
    oncall_api.post(f"/api/v1/alerts/{spread['same_run_other_component'].pk}/resolve/")  # closed while muted
    mute = Mute.objects.get()
    sweep_unevaluated()
    assert Mute.objects.get().ended_at is None and Alert.objects.get(pk=spread["acted"].pk).state == "muted"
    expire(mute)
    sweep_unevaluated()
    sweep_unevaluated()
    mute.refresh_from_db()
    assert mute.ended_at is not None
    assert Alert.objects.get(pk=spread["acted"].pk).state == "firing"
    assert Alert.objects.get(pk=spread["same_run_other_component"].pk).state == "resolved"
    [unmuted] = AlertChange.objects.filter(kind="unmuted")
    assert (unmuted.alert_id, unmuted.by, f"mute #{mute.pk}" in unmuted.note) == (spread["acted"].pk, None, True)


def test_an_alert_another_active_mute_covers_stays_muted(owner, oncall, alert):
    short = triage.mute(alert, owner, MuteScope.COMPONENT, "bad node", duration_minutes=60)
    triage.mute(alert, oncall, MuteScope.RULE, "rule being retuned", duration_minutes=24 * 60)
    expire(short)
    sweep_unevaluated()
    assert Mute.objects.get(pk=short.pk).ended_at is not None
    assert Alert.objects.get().state == "muted" and not AlertChange.objects.filter(kind="unmuted").exists()


def test_an_acknowledged_alert_is_left_alone_when_its_mute_expires(owner, alert):
    mute = triage.mute(alert, owner, MuteScope.RUN, "bad node", duration_minutes=60)
    triage.acknowledge(Alert.objects.get(), owner)
    expire(mute)
    sweep_unevaluated()
    assert Alert.objects.get().state == "acknowledged"
    assert list(triage_rows().values_list("kind", flat=True)) == ["muted", "acknowledged"]


def test_the_sweep_mutes_a_firing_alert_an_active_mute_covers(owner, rule):
    # E.g. an alert committed while its mute was being created: the next sweep catches it, once.
    first = make_alert(rule, component="layers.3")
    triage.mute(first, owner, MuteScope.RULE, "rule being retuned", duration_minutes=60)
    late = make_alert(rule, run="run-z", component="layers.0")
    sweep_unevaluated()
    sweep_unevaluated()
    assert Alert.objects.get(pk=late.pk).state == "muted"
    assert triage_rows(late).count() == 1


def test_a_reason_that_is_not_text_is_named(oncall_api, alert):
    response = oncall_api.post(mute_path(alert), {"scope": ["run"], "reason": 42, "duration_minutes": True}, format="json")
    assert {e["path"] for e in response.json()["errors"]} == {"scope", "reason", "duration_minutes"}
