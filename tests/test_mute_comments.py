"""A mute has a comment log: on-call and rule admins write in it, members read it, outsiders see nothing."""
import pytest

from alerts import triage
from alerts.models import MuteComment

pytestmark = pytest.mark.django_db


@pytest.fixture
def muted(oncall, alert):
    return triage.mute(alert, oncall, "run", "flaky node", duration_minutes=60)


def test_the_owner_comments_and_a_teammate_reads_it(api, owner, teammate, muted):
    api.force_login(owner)
    response = api.post(f"/api/v1/mutes/{muted.pk}/comments/", {"text": "  node replaced, watching  "}, format="json")
    assert response.status_code == 201, response.content
    assert [(c["by"], c["text"]) for c in response.json()["comments"]] == [("olivia", "node replaced, watching")]
    api.force_login(teammate)
    assert [c["text"] for c in api.get(f"/api/v1/mutes/{muted.pk}/").json()["comments"]] == ["node replaced, watching"]


def test_a_teammate_viewer_may_not_comment(api, teammate, muted):
    api.force_login(teammate)
    assert api.post(f"/api/v1/mutes/{muted.pk}/comments/", {"text": "me too"}, format="json").status_code == 403
    assert not MuteComment.objects.exists()


def test_an_outsider_sees_no_mute(api, outsider, muted):
    api.force_login(outsider)
    assert api.post(f"/api/v1/mutes/{muted.pk}/comments/", {"text": "hi"}, format="json").status_code == 404
    assert api.get(f"/api/v1/mutes/{muted.pk}/").status_code == 404
    assert not MuteComment.objects.exists()


@pytest.mark.parametrize("body", [{}, {"text": "   "}, {"text": 5}])
def test_a_comment_without_text_is_a_400_naming_text(api, owner, muted, body):
    api.force_login(owner)
    response = api.post(f"/api/v1/mutes/{muted.pk}/comments/", body, format="json")
    assert response.status_code == 400 and [e["path"] for e in response.json()["errors"]] == ["text"]


def test_an_ended_mute_still_takes_comments(api, owner, muted):
    triage.end_mute(muted, owner)
    api.force_login(owner)
    assert api.post(f"/api/v1/mutes/{muted.pk}/comments/", {"text": "ended: fixed"}, format="json").status_code == 201
