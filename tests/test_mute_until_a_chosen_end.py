"""The inbox's mute forms take a chosen end (a datetime-local input, UTC) besides 1 h / 4 h / 24 h / 7 days, up to
the project's longest mute (MuteSettings); past it the form says so beside the field, naming the maximum."""
import re
from datetime import timedelta, timezone as dt_timezone

import pytest
from django.utils import timezone

from alerts.models import Alert, Mute, MuteSettings
from tests.incident_support import healthy, incidents, nan_in_one_weight, send, starter_project

pytestmark = pytest.mark.django_db


def local(moment):
    """What a datetime-local input posts: no zone, minutes."""
    return moment.astimezone(dt_timezone.utc).strftime("%Y-%m-%dT%H:%M")


def field_error(html, field):
    found = re.search(rf'<p class="field-error error"[^>]*data-field="{field}">([^<]*)</p>', html)
    return found and found.group(1)


def test_the_alert_mute_form_offers_a_chosen_end_and_names_the_projects_longest_mute(client, oncall, alert, project):
    MuteSettings.objects.create(project=project, max_duration_hours=48)
    client.force_login(oncall)
    # The row's Mute… form as the server renders it (the link a row's panel holds; inbox-panels.js fills the
    # panel from the page's one form, with the same words: data-max below).
    assert 'data-max="2 days"' in client.get("/inbox/").content.decode()
    html = client.get(f"/inbox/alerts/{alert.pk}/mute/").content.decode()
    form = re.search(rf'<form[^>]*action="/inbox/alerts/{alert.pk}/mute/".*?</form>', html, re.S).group(0)
    assert re.search(rf'<input type="datetime-local" name="expires_at" id="mute-{alert.pk}-expires"', form)
    assert "at most 2 days ahead" in form


def test_a_mute_until_a_chosen_end_within_the_maximum(client, oncall, alert):
    client.force_login(oncall)
    end = timezone.now() + timedelta(days=3, hours=5)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "known bad node",
                                                                 "duration_minutes": "", "expires_at": local(end)})
    assert response.status_code == 302
    mute = Mute.objects.get()
    assert local(mute.expires_at) == local(end)
    assert Alert.objects.get().state == "muted"


def test_a_chosen_end_past_the_maximum_is_an_error_on_its_field_naming_the_maximum(client, oncall, alert):
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "known bad node",
                                                                 "expires_at": local(timezone.now() + timedelta(days=8))})
    assert response.status_code == 400
    message = field_error(response.content.decode(), "expires_at")
    assert message and "7 days" in message and "chosen end" in message and "expires_at" not in message
    assert not Mute.objects.exists() and Alert.objects.get().state == "firing"


def test_a_chosen_end_in_the_past_is_an_error_on_its_field(client, oncall, alert):
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "known bad node",
                                                                 "expires_at": local(timezone.now() - timedelta(hours=1))})
    assert response.status_code == 400
    assert "in the future" in field_error(response.content.decode(), "expires_at")
    assert not Mute.objects.exists()


def test_an_incident_is_muted_until_a_chosen_end(client, sender, project, oncall):
    starter_project(project)
    send(sender, "one-nan", healthy(range(0, 30)) + nan_in_one_weight(30))
    [incident] = incidents("one-nan")
    client.force_login(oncall)
    html = client.get(f"/inbox/incidents/{incident.pk}/mute/").content.decode()
    assert f'id="incident-mute-{incident.pk}-expires"' in html
    end = timezone.now() + timedelta(hours=30)
    too_far = client.post(f"/inbox/incidents/{incident.pk}/mute/", {"scope": "run", "reason": "known bad node",
                                                                      "expires_at": local(end + timedelta(days=7))})
    assert too_far.status_code == 400 and "7 days" in field_error(too_far.content.decode(), "expires_at")
    assert not Mute.objects.exists()
    done = client.post(f"/inbox/incidents/{incident.pk}/mute/", {"scope": "run", "reason": "known bad node", "expires_at": local(end)})
    assert done.status_code == 302
    assert {local(m.expires_at) for m in Mute.objects.all()} == {local(end)}


def test_a_duration_and_a_chosen_end_together_are_an_error_on_the_end(client, oncall, alert):
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "known bad node", "duration_minutes": "60",
                                                                 "expires_at": local(timezone.now() + timedelta(hours=3))})
    assert response.status_code == 400
    assert field_error(response.content.decode(), "expires_at") == "choose a duration or an end, not both"
    assert not Mute.objects.exists()
