"""A channel's URL is a credential (a Slack incoming webhook, `http://user:pass@host/`): rule admins see it whole;
members who are not rule admins see its host alone, on every endpoint and page, the delivery log included; the
project's ingest token, which sits in every job's config, reads no channel at all."""
import pytest
from django.utils import timezone

from notifications.models import Channel, Delivery, DeliveryStatus
from opsconsole.models import PersonalToken
from tests.factories import client_for
from tests.notify_support import make_channel

pytestmark = pytest.mark.django_db

# Every part of it that would let a reader post as the channel: userinfo, the webhook's path, a token in the query.
URL = "http://hookuser:hookpass9@127.0.0.1:9/services/T0AAA/B0BBB/xoxWebhookSecret?token=querySecret42"
HOST = "127.0.0.1:9"
CREDENTIALS = ("hookpass9", "xoxWebhookSecret", "querySecret42", "hookuser", "/services/T0AAA")


@pytest.fixture
def channel(project):
    channel = make_channel(project, kind="slack", name="team-slack", url=URL)
    # What a failed try may record: the URL the sender could not use, a redirect's Location.
    for detail in (f"InvalidURL: cannot post to {URL}",
                   "HTTP 302: redirected to https://hooks.example/services/T0AAA/B0BBB/xoxWebhookSecret",
                   "unreachable: /services/T0AAA/B0BBB/xoxWebhookSecret?token=querySecret42 refused"):
        Delivery.objects.create(channel=channel, attempt=1, at=timezone.now(), duration_ms=3, test=True,
                                status=DeliveryStatus.FAILED, detail=detail)
    return channel


def leaked(content: bytes) -> list[str]:
    text = content.decode()
    return [part for part in CREDENTIALS if part in text]


def test_rule_admin_sees_the_whole_url(api, owner, channel):
    api.force_login(owner)
    listed = api.get("/api/v1/channels/").json()["results"]
    assert [(c["url"], c["host"]) for c in listed] == [(URL, HOST)]
    assert api.get(f"/api/v1/channels/{channel.pk}/").json()["url"] == URL
    log = api.get(f"/api/v1/channels/{channel.pk}/deliveries/").json()
    assert any(URL in d["detail"] for d in log)
    page = client_for(owner).get(f"/channels/{channel.pk}/").content.decode()
    assert URL.replace("&", "&amp;") in page and "xoxWebhookSecret" in page


def test_a_viewer_sees_the_host_alone(api, teammate, channel):
    api.force_login(teammate)
    listed = api.get("/api/v1/channels/")
    assert listed.status_code == 200 and [(c["url"], c["host"]) for c in listed.json()["results"]] == [(None, HOST)]
    one = api.get(f"/api/v1/channels/{channel.pk}/")
    assert one.status_code == 200 and (one.json()["url"], one.json()["host"]) == (None, HOST)
    log = api.get(f"/api/v1/channels/{channel.pk}/deliveries/")
    assert log.status_code == 200 and len(log.json()) == 3
    assert "hooks.example" in str(log.json())  # where a redirect pointed, by its host
    for response in (listed, one, log):
        assert leaked(response.content) == [], response.content

    client = client_for(teammate)
    for path in ("/channels/", f"/channels/{channel.pk}/", f"/channels/?project={channel.project.slug}"):
        page = client.get(path)
        assert page.status_code == 200 and leaked(page.content) == [], path
    assert HOST in client.get(f"/channels/{channel.pk}/").content.decode()


def test_a_viewers_personal_token_sees_the_host_alone(api, teammate, channel):
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {PersonalToken.issue(teammate)[1]}")
    one = api.get(f"/api/v1/channels/{channel.pk}/")
    assert one.status_code == 200 and one.json()["url"] is None and leaked(one.content) == []


def test_the_ingest_token_reads_no_channel(api, token, channel):
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    calls = [("get", "/api/v1/channels/"), ("get", f"/api/v1/channels/?project={channel.project.slug}"),
             ("get", f"/api/v1/channels/{channel.pk}/"), ("get", f"/api/v1/channels/{channel.pk}/deliveries/"),
             ("post", f"/api/v1/channels/{channel.pk}/test/"), ("patch", f"/api/v1/channels/{channel.pk}/"),
             ("delete", f"/api/v1/channels/{channel.pk}/"), ("post", "/api/v1/channels/")]
    for method, path in calls:
        response = getattr(api, method)(path, {"project": "pretrain", "name": "x", "kind": "slack", "url": URL}
                                        if method != "get" else None, format="json")
        assert response.status_code == 403, (method, path, response.status_code)
        assert leaked(response.content) == [] and "team-slack" not in response.content.decode(), (method, path)
    assert "ingest token reads no channel" in api.get("/api/v1/channels/").json()["errors"][0]["message"]
    assert list(Channel.objects.values_list("name", "url", "enabled")) == [("team-slack", URL, True)]
    assert Delivery.objects.count() == 3


def test_an_outsider_sees_neither_the_channel_nor_its_host(api, outsider, channel):
    api.force_login(outsider)
    assert api.get("/api/v1/channels/").json()["results"] == []
    assert api.get(f"/api/v1/channels/{channel.pk}/").status_code == 404
    assert client_for(outsider).get(f"/channels/{channel.pk}/").status_code == 404
    assert HOST not in client_for(outsider).get("/channels/").content.decode()
