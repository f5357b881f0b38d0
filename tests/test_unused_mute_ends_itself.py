"""A mute that has covered no alert for the project's unused_days (3 by default) ends by itself, with a note."""
from datetime import timedelta

import pytest

from alerts import triage
from alerts.models import Alert, MuteComment, MuteSettings
from tests.factories import make_alert

pytestmark = pytest.mark.django_db


def quiet_mute(oncall, alert, days=7):
    """A mute whose only alert was resolved right away: it holds nothing from then on."""
    made = triage.mute(alert, oncall, "rule", "noisy while we tune it", duration_minutes=days * 24 * 60)
    triage.resolve(alert, oncall)
    return made


def test_it_ends_after_three_quiet_days_once_with_a_note(oncall, alert):
    made = quiet_mute(oncall, alert)
    start = made.created_at
    assert triage.sweep_mutes(now=start + timedelta(days=2, hours=23)) == 0
    assert triage.sweep_mutes(now=start + timedelta(days=3, minutes=1)) == 1
    assert triage.sweep_mutes(now=start + timedelta(days=3, minutes=2)) == 0  # ended once
    made.refresh_from_db()
    assert (made.end_reason, made.ended_by, made.ended_at) == ("unused", None, start + timedelta(days=3, minutes=1))
    assert list(MuteComment.objects.filter(mute=made).values_list("by", "text")) == [
        (None, "ended: covered no alert for 3 days")]


def test_a_newly_held_alert_keeps_it_alive(oncall, rule, alert):
    made = quiet_mute(oncall, alert)
    start = made.created_at
    later = make_alert(rule, run="run-b")
    triage.apply_mutes(later, now=start + timedelta(days=2))
    triage.resolve(later, oncall, now=start + timedelta(days=2))
    assert triage.sweep_mutes(now=start + timedelta(days=4)) == 0
    assert triage.sweep_mutes(now=start + timedelta(days=5, minutes=1)) == 1


def test_a_mute_still_holding_a_muted_alert_is_in_use(oncall, alert):
    made = triage.mute(alert, oncall, "run", "until the fix", duration_minutes=7 * 24 * 60)
    assert triage.sweep_mutes(now=made.created_at + timedelta(days=4)) == 0
    assert Alert.objects.get(pk=alert.pk).state == "muted"


def test_the_number_of_days_is_a_project_setting(oncall, project, alert):
    MuteSettings.objects.create(project=project, unused_days=1)
    made = quiet_mute(oncall, alert)
    assert triage.sweep_mutes(now=made.created_at + timedelta(days=1, minutes=1)) == 1
    assert MuteComment.objects.get().text == "ended: covered no alert for 1 day"
