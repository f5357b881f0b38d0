"""Creating a channel is all or nothing, and the 201 points at the channel, not at where it sends.

DRF puts a serializer's `url` field into the 201's `Location`: for a channel that was its target URL (a
credential), and a CR/LF in it turned the 201 into a 500 after the row was saved.
"""
import pytest

from notifications import api as channels_api
from notifications.models import Channel, ChannelChange

pytestmark = pytest.mark.django_db

BODY = {"project": "pretrain", "name": "team-hook", "kind": "webhook", "url": "https://hooks.example/T0/B0/secretpath"}


def test_location_is_the_channels_own_api_url(api, owner):
    api.force_login(owner)
    created = api.post("/api/v1/channels/", BODY, format="json")
    assert created.status_code == 201, created.content
    channel_id = created.json()["id"]
    assert created["Location"].endswith(f"/api/v1/channels/{channel_id}/")
    assert "secretpath" not in created["Location"]
    assert api.get(created["Location"]).json()["name"] == "team-hook"


def test_crlf_in_the_url_is_never_a_500_nor_a_half_saved_channel(api, owner):
    api.force_login(owner)
    api.raise_request_exception = False
    response = api.post("/api/v1/channels/", {**BODY, "url": "https://hooks.example/a\r\nX-Injected: yes"}, format="json")
    assert response.status_code in (201, 400), response.status_code
    assert not response.has_header("X-Injected")
    # Refused (a 400 on `url`), nothing stored; taken, the answer describes what was stored.
    stored = Channel.objects.filter(name="team-hook").exists()
    assert stored == (response.status_code == 201)
    if response.status_code == 400:
        assert [e["path"] for e in response.json()["errors"]] == ["url"]
        assert not ChannelChange.objects.exists()
    else:
        assert response["Location"].endswith(f"/api/v1/channels/{response.json()['id']}/")


def test_a_create_that_fails_after_the_row_is_written_stores_nothing(api, owner, monkeypatch):
    api.force_login(owner)
    api.raise_request_exception = False

    def database_gone(channels):
        raise RuntimeError("the connection dropped while the answer was read")

    monkeypatch.setattr(channels_api, "with_status", database_gone)
    failed = api.post("/api/v1/channels/", BODY, format="json")
    assert failed.status_code == 500
    assert not Channel.objects.exists() and not ChannelChange.objects.exists()

    monkeypatch.undo()
    again = api.post("/api/v1/channels/", BODY, format="json")  # not "already has a channel named team-hook"
    assert again.status_code == 201, again.content
    assert list(ChannelChange.objects.values_list("channel_name", "action")) == [("team-hook", "created")]


def test_an_edit_that_fails_after_the_row_is_written_keeps_the_channel_as_it_was(api, owner, monkeypatch):
    api.force_login(owner)
    channel_id = api.post("/api/v1/channels/", BODY, format="json").json()["id"]
    api.raise_request_exception = False
    monkeypatch.setattr(channels_api, "with_status", lambda channels: 1 / 0)
    failed = api.patch(f"/api/v1/channels/{channel_id}/", {"enabled": False}, format="json")
    assert failed.status_code == 500
    assert Channel.objects.get().enabled is True
    assert list(ChannelChange.objects.values_list("action", flat=True)) == ["created"]
