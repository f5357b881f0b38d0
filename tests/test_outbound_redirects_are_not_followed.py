"""A receiver answering 3xx gets no second request: the credentials and the body never reach the Location's host,
and the try is logged failed, naming the Location, so the admin can fix the channel's URL.

Before issue 21 urllib followed redirects: a 302 turned the POST into a GET to the Location with the
`Authorization: Bearer <secret>` header, and a 200 from there was logged "ok" although nobody was paged.
"""
import pytest

from notifications import tasks
from notifications.models import Delivery, Notification
from tests.notify_support import fire, make_channel, spike_rule
from tests.outbound_support import Recorder, Redirecting

pytestmark = pytest.mark.django_db

TOKEN = "am-bearer-token-7f3a"


@pytest.fixture
def target():
    t = Recorder()
    yield t
    t.close()


def redirecting_to(location, status=302):
    return Redirecting(location, status=status)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_an_alertmanager_redirect_is_a_failed_try_and_the_token_stays_home(project, sender, target, status):
    hop = redirecting_to(target.url + "/api/v2/alerts?from=redirect", status)
    try:
        spike_rule(project)
        channel = make_channel(project, kind="alertmanager", url=hop.url, secret=TOKEN)
        fire(sender)
    finally:
        hop.close()
    assert target.requests == []  # neither the token nor the incident went to the Location's host
    assert [r["headers"].get("Authorization") for r in hop.requests] == [f"Bearer {TOKEN}"]
    [row] = Delivery.objects.filter(channel=channel)
    assert (row.status, row.status_code) == ("failed", status)
    assert f"redirect to {target.url}/api/v2/alerts refused" in row.detail
    assert "from=redirect" not in row.detail and TOKEN not in row.detail
    assert Notification.objects.get().state == "failed"
    assert tasks.sweep_now()["queued"] == 0  # not retried: the URL needs fixing


def test_an_http_to_https_redirect_is_never_logged_ok(api, owner, project):
    hop = redirecting_to("https://alertmanager.example/api/v2/alerts", 301)
    try:
        channel = make_channel(project, kind="alertmanager", url=hop.url, secret=TOKEN)
        api.force_login(owner)
        tested = api.post(f"/api/v1/channels/{channel.pk}/test/").json()
    finally:
        hop.close()
    assert (tested["status"], tested["status_code"]) == ("failed", 301)
    assert "redirect to https://alertmanager.example/api/v2/alerts refused" in tested["detail"]
    assert [r["method"] for r in hop.requests] == ["POST"]


def test_a_redirect_to_another_scheme_is_not_followed(project, sender, target):
    hop = redirecting_to("ftp://127.0.0.1:1/pub")
    try:
        spike_rule(project)
        channel = make_channel(project, url=hop.url + "/hook", secret="webhook-key")
        fire(sender)
    finally:
        hop.close()
    [row] = Delivery.objects.filter(channel=channel)
    assert row.status == "failed" and "redirect to ftp://127.0.0.1:1/pub refused" in row.detail


def test_a_relative_redirect_names_where_it_points(project, sender, target):
    hop = redirecting_to("/elsewhere/hook")
    try:
        spike_rule(project)
        channel = make_channel(project, kind="slack", url=hop.url + "/services/T0/B0/X")
        fire(sender)
    finally:
        hop.close()
    [row] = Delivery.objects.filter(channel=channel)
    assert row.status == "failed" and f"redirect to {hop.url}/elsewhere/hook refused" in row.detail
    assert len(hop.requests) == 1  # the redirect was not followed back to the same host either
