"""The channels pages: members see channels and their delivery logs, rule admins add, edit, test and delete;
the secret is never written into a page, and an edit that leaves it blank keeps it."""
import pytest

from notifications.models import Channel
from tests.factories import client_for
from tests.notify_support import SECRET, make_channel

pytestmark = pytest.mark.django_db


@pytest.fixture
def channel(project, receiver):
    return make_channel(project, name="existing", url=receiver.url, secret=SECRET)


def form(**overrides):
    return {"project": "pretrain", "name": "team-hook", "kind": "webhook", "url": "https://hooks.example/wl",
            "secret": SECRET, "config": "", "enabled": "on", **overrides}


def test_rule_admin_adds_and_edits_without_the_secret_shown_back(owner, channel):
    client = client_for(owner)
    created = client.post("/channels/new/", form())
    assert created.status_code == 302
    new = Channel.objects.get(name="team-hook")
    assert new.secret == SECRET
    edit_page = client.get(f"/channels/{new.pk}/edit/").content.decode()
    assert SECRET not in edit_page and "(set)" in edit_page

    edited = client.post(f"/channels/{new.pk}/edit/", form(url="https://hooks.example/other", secret=""))
    assert edited.status_code == 302
    new.refresh_from_db()
    assert (new.url, new.secret) == ("https://hooks.example/other", SECRET)  # blank: unchanged
    for path in ("/channels/", f"/channels/{new.pk}/"):
        assert SECRET not in client.get(path).content.decode()


def test_a_bad_field_is_shown_beside_it_and_nothing_saved(owner, channel):
    response = client_for(owner).post("/channels/new/", form(kind="email", config='{"recipients": []}'))
    assert response.status_code == 400
    assert "an email channel needs a list" in response.content.decode()
    assert not Channel.objects.filter(name="team-hook").exists()


def test_send_a_test_message_from_the_page(owner, channel, receiver):
    response = client_for(owner).post(f"/channels/{channel.pk}/test/", follow=True)
    assert "Test message delivered" in response.content.decode()
    assert receiver.bodies()[0]["event"] == "test"


def test_teammate_reads_only(teammate, channel):
    client = client_for(teammate)
    assert client.get("/channels/").status_code == 200
    page = client.get(f"/channels/{channel.pk}/")
    assert page.status_code == 200 and "Send a test message" not in page.content.decode()
    assert client.get("/channels/new/").status_code == 403
    assert client.get(f"/channels/{channel.pk}/edit/").status_code == 403
    assert client.post(f"/channels/{channel.pk}/test/").status_code == 403
    assert client.post(f"/channels/{channel.pk}/delete/").status_code == 403
    assert Channel.objects.filter(pk=channel.pk).exists()


def test_outsider_gets_404(outsider, channel):
    client = client_for(outsider)
    assert "existing" not in client.get("/channels/").content.decode()
    for path in ("", "edit/"):
        assert client.get(f"/channels/{channel.pk}/{path}").status_code == 404
    for path in ("test/", "delete/"):
        assert client.post(f"/channels/{channel.pk}/{path}").status_code == 404


def test_rule_admin_deletes(owner, channel):
    assert client_for(owner).post(f"/channels/{channel.pk}/delete/").status_code == 302
    assert not Channel.objects.exists()
