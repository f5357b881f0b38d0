"""The channels API: members read, rule admins write and test, outsiders and ingest tokens see nothing; the secret
is never answered."""
import pytest

from notifications.models import Channel, ChannelChange, Delivery
from tests.notify_support import SECRET, make_channel

pytestmark = pytest.mark.django_db


def body(**overrides):
    return {"project": "pretrain", "name": "team-hook", "kind": "webhook", "url": "https://hooks.example/wl",
            "secret": SECRET, **overrides}


@pytest.fixture
def channel(project, receiver):
    return make_channel(project, name="existing", url=receiver.url, secret=SECRET)


def test_rule_admin_creates_edits_tests_and_deletes(api, owner, channel, receiver):
    api.force_login(owner)
    created = api.post("/api/v1/channels/", body(), format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert data["has_secret"] is True and "secret" not in data and SECRET not in created.content.decode()
    assert Channel.objects.get(pk=data["id"]).secret == SECRET

    patched = api.patch(f"/api/v1/channels/{data['id']}/", {"enabled": False}, format="json")
    assert patched.status_code == 200 and patched.json()["enabled"] is False
    assert patched.json()["has_secret"] is True  # left out: kept
    cleared = api.patch(f"/api/v1/channels/{data['id']}/", {"secret": ""}, format="json")
    assert cleared.json()["has_secret"] is False

    tested = api.post(f"/api/v1/channels/{channel.pk}/test/")
    assert tested.status_code == 200 and tested.json()["status"] == "ok" and tested.json()["test"] is True
    assert receiver.bodies()[0]["event"] == "test"
    log = api.get(f"/api/v1/channels/{channel.pk}/deliveries/").json()
    assert [(d["status"], d["status_code"], d["test"]) for d in log] == [("ok", 200, True)]

    assert api.delete(f"/api/v1/channels/{data['id']}/").status_code == 204
    changes = list(ChannelChange.objects.filter(channel_name="team-hook").values_list("action", "fields", "by__username"))
    assert changes == [("created", ["config", "enabled", "kind", "name", "secret", "url"], "olivia"),
                       ("updated", ["enabled"], "olivia"), ("updated", ["secret"], "olivia"), ("deleted", [], "olivia")]
    assert SECRET not in str(list(ChannelChange.objects.values()))


def test_teammate_reads_but_may_not_write_or_test(api, teammate, channel):
    api.force_login(teammate)
    listed = api.get("/api/v1/channels/")
    assert listed.status_code == 200 and [c["name"] for c in listed.json()["results"]] == ["existing"]
    assert SECRET not in listed.content.decode()
    assert api.get(f"/api/v1/channels/{channel.pk}/").status_code == 200
    assert api.get(f"/api/v1/channels/{channel.pk}/deliveries/").status_code == 200
    assert api.post("/api/v1/channels/", body(), format="json").status_code == 403
    assert api.patch(f"/api/v1/channels/{channel.pk}/", {"enabled": False}, format="json").status_code == 403
    assert api.post(f"/api/v1/channels/{channel.pk}/test/").status_code == 403
    assert api.delete(f"/api/v1/channels/{channel.pk}/").status_code == 403
    assert Channel.objects.get().enabled and not Delivery.objects.exists()


def test_outsider_sees_nothing(api, outsider, channel):
    api.force_login(outsider)
    assert api.get("/api/v1/channels/").json()["results"] == []
    for method, path in (("get", ""), ("get", "deliveries/"), ("post", "test/"), ("patch", ""), ("delete", "")):
        response = getattr(api, method)(f"/api/v1/channels/{channel.pk}/{path}", {}, format="json")
        assert response.status_code == 404, (method, path)
    created = api.post("/api/v1/channels/", body(), format="json")
    assert created.status_code == 400 and created.json()["errors"][0]["path"] == "project"
    assert Channel.objects.count() == 1


def test_project_token_reads_no_channel(api, token, channel):
    # A channel's URL is a credential and the ingest token sits in every job's config
    # (tests/test_channel_urls_are_credentials.py covers every endpoint).
    listed = api.get("/api/v1/channels/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert listed.status_code == 403 and SECRET not in listed.content.decode() and "existing" not in listed.content.decode()
    assert api.post("/api/v1/channels/", body(), format="json", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403


@pytest.mark.parametrize("overrides, path", [
    ({"url": "ftp://hooks.example"}, "url"),
    ({"url": ""}, "url"),
    ({"kind": "pager"}, "kind"),
    ({"kind": "email", "config": {"recipients": "oncall@example.com"}}, "config.recipients"),
    ({"kind": "email", "config": {"recipients": ["not an address"]}}, "config.recipients"),
    ({"kind": "alertmanager", "config": {"labels": {"run": "x"}}}, "config.labels.run"),
    ({"kind": "alertmanager", "config": {"labels": {"9team": "x"}}}, "config.labels.9team"),
    ({"config": {"recipients": ["a@example.com"]}}, "config.recipients"),
    ({"name": "existing"}, "name"),
    ({"enabled": "yes"}, "enabled"),
])
def test_bad_fields_are_a_400_naming_them(api, owner, channel, overrides, path):
    api.force_login(owner)
    response = api.post("/api/v1/channels/", body(**overrides), format="json")
    assert response.status_code == 400, response.content
    assert path in [e["path"] for e in response.json()["errors"]]
    assert Channel.objects.count() == 1
