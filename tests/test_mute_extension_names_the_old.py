"""Extending a mute makes a new one that names the old; the old ends as replaced; its alerts stay muted."""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts import triage
from alerts.models import Alert, AlertChange, ChangeKind, Mute

pytestmark = pytest.mark.django_db


def iso(when):
    return when.isoformat().replace("+00:00", "Z")


@pytest.fixture
def oncall_api(api, oncall):
    api.force_login(oncall)
    return api


def test_an_extension_is_a_new_mute_naming_the_old(oncall_api, oncall, alert):
    old = triage.mute(alert, oncall, "component", "fix ships tomorrow", duration_minutes=60)
    until = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    response = oncall_api.post(f"/api/v1/mutes/{old.pk}/extend/", {"expires_at": iso(until), "reason": "fix slipped a day"},
                               format="json")
    assert response.status_code == 201, response.content
    new = response.json()
    assert new["id"] != old.pk and new["extends"] == old.pk
    assert (new["scope"], new["run"], new["component"], new["reason"]) == ("component", "run-a", "layers.3", "fix slipped a day")
    assert Mute.objects.get(pk=new["id"]).expires_at == until
    assert [h["alert"] for h in new["holds"]] == [alert.pk]
    old.refresh_from_db()
    assert (old.end_reason, old.ended_by) == ("replaced", oncall)
    old_view = oncall_api.get(f"/api/v1/mutes/{old.pk}/").json()
    assert old_view["extended_by"] == new["id"] and old_view["history"][-1]["kind"] == "extended"
    # The alert never fired in between.
    assert Alert.objects.get(pk=alert.pk).state == "muted"
    assert not AlertChange.objects.filter(kind=ChangeKind.UNMUTED).exists()


def test_the_extension_obeys_the_window_rule(oncall_api, oncall, alert):
    old = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    too_far = iso(timezone.now() + timedelta(days=8))
    response = oncall_api.post(f"/api/v1/mutes/{old.pk}/extend/", {"expires_at": too_far, "reason": "longer"}, format="json")
    assert response.status_code == 400 and [e["path"] for e in response.json()["errors"]] == ["expires_at"]
    assert Mute.objects.count() == 1 and Mute.objects.get().ended_at is None


def test_an_ended_mute_cannot_be_extended(oncall_api, oncall, alert):
    old = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    triage.end_mute(old, oncall)
    response = oncall_api.post(f"/api/v1/mutes/{old.pk}/extend/", {"duration_minutes": 60, "reason": "again"}, format="json")
    assert response.status_code == 400 and [e["path"] for e in response.json()["errors"]] == ["state"]
    assert Mute.objects.count() == 1


def test_an_extension_needs_a_reason(oncall_api, oncall, alert):
    old = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    response = oncall_api.post(f"/api/v1/mutes/{old.pk}/extend/", {"duration_minutes": 60}, format="json")
    assert [e["path"] for e in response.json()["errors"]] == ["reason"]
