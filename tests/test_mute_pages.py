"""The mutes pages: a project's mutes, active or ended; one mute with its history, held alerts and comment form."""
import pytest

from alerts import triage
from alerts.models import MuteComment
from tests.factories import client_for, make_alert

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_mutes(oncall, rule, alert):
    active = triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)
    other = make_alert(rule, run="run-b")
    ended = triage.mute(other, oncall, "run", "bad shard", duration_minutes=60)
    triage.end_mute(ended, oncall)
    return active, ended


def test_the_list_filters_active_and_ended(teammate, project, two_mutes):
    active, ended = two_mutes
    client = client_for(teammate)
    page = client.get(f"/mutes/?project={project.slug}").content.decode()
    assert "flaky node" in page and "bad shard" not in page
    page = client.get(f"/mutes/?project={project.slug}&status=ended").content.decode()
    assert "bad shard" in page and "flaky node" not in page
    assert "ended by a person by omar" in page


def test_an_outsider_sees_neither_the_project_nor_a_mute(outsider, project, two_mutes):
    client = client_for(outsider)
    assert client.get(f"/mutes/?project={project.slug}").status_code == 404
    assert client.get(f"/mutes/{two_mutes[0].pk}/").status_code == 404


def test_the_mute_page_shows_the_held_alert_and_takes_a_comment(oncall, alert, two_mutes):
    active, _ = two_mutes
    client = client_for(oncall)
    page = client.get(f"/mutes/{active.pk}/").content.decode()
    assert f"alert #{alert.pk} on run-a" in page and 'name="text"' in page
    response = client.post(f"/mutes/{active.pk}/comments/", {"text": "node drained"})
    assert response.status_code == 302
    assert "node drained" in client.get(f"/mutes/{active.pk}/").content.decode()
    blank = client.post(f"/mutes/{active.pk}/comments/", {"text": "  "})
    assert blank.status_code == 400 and "text is required" in blank.content.decode()
    assert MuteComment.objects.count() == 1


def test_a_viewer_reads_but_gets_no_comment_form(teammate, two_mutes):
    client = client_for(teammate)
    assert 'name="text"' not in client.get(f"/mutes/{two_mutes[0].pk}/").content.decode()
    assert client.post(f"/mutes/{two_mutes[0].pk}/comments/", {"text": "hi"}).status_code == 403
