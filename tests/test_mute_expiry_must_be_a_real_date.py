"""A mute's `expires_at` that is no real, representable date is a 400 on `expires_at`, never a 500.

February 30th and an offset of 99 hours are well-formed ISO 8601 to a regex but
no date (the parser raised), and a date near the ends of the calendar with a
far offset overflows when converted to UTC.
"""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.models import Alert, Mute
from tests.factories import make_alert, make_rule
from tests.triage_support import triage_rows

pytestmark = pytest.mark.django_db

NOT_A_DATE = [
    "10000-01-01T00:00:00Z",
    "2026-01-01T00:00:00+99:00",
    "2026-01-01T00:00:00-24:00",
    "2026-02-30T00:00:00",
    "2026-13-01T00:00:00Z",
    "2026-01-01T25:00:00Z",
    "9999-12-31T23:59:59-23:59",
    "0001-01-01T00:00:00+23:59",
    "garbage",
    "",
    " ",
    "2026-01-01T00:00:00\x00",
    "9" * 5000,
]


@pytest.mark.parametrize("expires_at", NOT_A_DATE + [12, 1e300, True, [], {"at": "2026-12-01T00:00:00Z"}])
def test_an_expiry_that_is_not_a_real_date_is_a_400_on_expires_at(api, oncall, project, expires_at):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    api.force_login(oncall)
    body = {"scope": "run", "reason": "flaky node", "expires_at": expires_at}
    response = api.post(f"/api/v1/alerts/{alert.pk}/mute/", body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert [e["path"] for e in response.json()["errors"]] == ["expires_at"], response.json()
    assert not Mute.objects.exists() and Alert.objects.get().state == "firing" and not triage_rows().exists()


def test_an_expiry_with_a_far_but_valid_offset_is_taken_as_the_instant_it_names(api, oncall, project):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    api.force_login(oncall)
    until = (timezone.now() + timedelta(hours=30)).replace(microsecond=0)
    # 30 hours from now, written as a time of day 23:59 ahead of UTC: the same instant.
    local = until.astimezone(timezone.get_fixed_timezone(23 * 60 + 59)).isoformat()
    response = api.post(f"/api/v1/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "x", "expires_at": local}, format="json")
    assert response.status_code == 201, response.content
    assert Mute.objects.get().expires_at == until


@pytest.mark.parametrize("duration", ["99999999999999999999", "9" * 5000, "-5", "1.5", "1e3", "\x00"])
def test_the_inbox_form_refuses_a_bad_duration_beside_its_field(client, oncall, project, duration):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "x", "duration_minutes": duration})
    assert response.status_code == 400
    assert 'data-field="duration_minutes"' in response.content.decode()
    assert not Mute.objects.exists()
