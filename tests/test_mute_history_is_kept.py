"""A mute keeps who made it and why, who ended it, when and why, and every alert it held."""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts import triage
from alerts.models import Alert, AlertChange, ChangeKind, Mute, MuteHold
from tests.factories import make_alert

pytestmark = pytest.mark.django_db


@pytest.fixture
def oncall_api(api, oncall):
    api.force_login(oncall)
    return api


def test_the_alerts_a_mute_held_are_kept_with_when(oncall_api, oncall, rule, alert):
    made = triage.mute(alert, oncall, "rule", "noisy rule during the sweep", duration_minutes=60)
    later = make_alert(rule, run="run-b", component="layers.7")  # born while the mute is active
    assert triage.apply_mutes(later) == made
    holds = oncall_api.get(f"/api/v1/mutes/{made.pk}/").json()["holds"]
    assert [h["alert"] for h in holds] == [alert.pk, later.pk]
    assert MuteHold.objects.filter(mute=made).count() == 2


def test_ending_by_hand_records_who_and_when_and_the_alerts_fire_again(oncall_api, oncall, alert):
    made = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    response = oncall_api.post(f"/api/v1/mutes/{made.pk}/end/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["ended_by"], body["end_reason"], body["active"]) == ("omar", "ended_by_person", False)
    assert [e["kind"] for e in body["history"]] == ["created", "ended"]
    assert body["history"][1]["by"] == "omar"
    made.refresh_from_db()
    assert made.ended_by == oncall and made.ended_at is not None
    assert Alert.objects.get(pk=alert.pk).state == "firing"
    unmuted = AlertChange.objects.get(alert=alert, kind=ChangeKind.UNMUTED)
    assert unmuted.by == oncall and "ended by hand" in unmuted.note


def test_an_ended_mute_cannot_be_ended_again(oncall_api, oncall, alert):
    made = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    assert oncall_api.post(f"/api/v1/mutes/{made.pk}/end/").status_code == 200
    again = oncall_api.post(f"/api/v1/mutes/{made.pk}/end/")
    assert again.status_code == 400 and [e["path"] for e in again.json()["errors"]] == ["state"]
    assert AlertChange.objects.filter(kind=ChangeKind.UNMUTED).count() == 1


def test_expiry_is_recorded_as_expired_with_nobody_ending_it(oncall, alert):
    made = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    assert triage.sweep_mutes(now=timezone.now() + timedelta(hours=2)) == 1
    made.refresh_from_db()
    assert (made.end_reason, made.ended_by) == ("expired", None)
    assert Alert.objects.get(pk=alert.pk).state == "firing"


def test_a_viewer_may_read_a_mute_but_not_end_it_and_an_outsider_sees_nothing(api, oncall, teammate, outsider, alert):
    made = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    api.force_login(teammate)
    assert api.get(f"/api/v1/mutes/{made.pk}/").json()["created_by"] == "omar"
    assert api.post(f"/api/v1/mutes/{made.pk}/end/").status_code == 403
    api.force_login(outsider)
    assert api.get(f"/api/v1/mutes/{made.pk}/").status_code == 404
    assert api.post(f"/api/v1/mutes/{made.pk}/end/").status_code == 404
    assert Mute.objects.get().ended_at is None
