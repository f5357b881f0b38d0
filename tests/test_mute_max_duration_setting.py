"""The longest mute is a project setting (7 days unless set); past it only a rule admin may mute, flagged over_limit."""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.models import Mute, MuteSettings

pytestmark = pytest.mark.django_db


def iso(when):
    return when.isoformat().replace("+00:00", "Z")


def mute(api, user, alert, **body):
    api.force_login(user)
    return api.post(f"/api/v1/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "long job", **body}, format="json")


def test_the_project_setting_replaces_the_seven_days(api, oncall, project, alert):
    MuteSettings.objects.create(project=project, max_duration_hours=2)
    response = mute(api, oncall, alert, duration_minutes=3 * 60)
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["path"] == "duration_minutes" and "2 hours" in error["message"] and "rule admin" in error["message"]
    assert mute(api, oncall, alert, duration_minutes=2 * 60).status_code == 201


def test_on_call_asking_past_the_limit_gets_a_400_naming_expires_at(api, oncall, alert):
    response = mute(api, oncall, alert, expires_at=iso(timezone.now() + timedelta(days=10)))
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["path"] == "expires_at" and "7 days" in error["message"]
    assert not Mute.objects.exists()


def test_a_rule_admin_may_go_past_it_and_the_mute_is_flagged(api, owner, alert):
    response = mute(api, owner, alert, expires_at=iso(timezone.now() + timedelta(days=10)))
    assert response.status_code == 201, response.content
    assert response.json()["mute"]["over_limit"] is True
    assert Mute.objects.get().over_limit is True


def test_within_the_limit_a_rule_admin_s_mute_is_not_flagged(api, owner, alert):
    assert mute(api, owner, alert, duration_minutes=60).json()["mute"]["over_limit"] is False


def test_nobody_mutes_past_the_ceiling(api, owner, alert):
    response = mute(api, owner, alert, expires_at=iso(timezone.now() + timedelta(days=400)))
    assert response.status_code == 400 and [e["path"] for e in response.json()["errors"]] == ["expires_at"]
