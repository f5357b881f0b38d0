"""A channel's secret, and what its receiver answers, never reach the delivery log that members and the ingest
token read; a secret or URL that a header cannot carry is refused when it is saved.

Before issue 21 a secret with a trailing newline was printed whole in the log (`Invalid header value
b'Bearer abc\\n'`), `tok\\r\\nX-Injected: yes` the same, and a failed answer's first 200 bytes were logged.
"""
import socket
import threading

import pytest

from notifications.models import Channel, ChannelChange, Delivery
from tests.notify_support import fire, make_channel, spike_rule

pytestmark = pytest.mark.django_db


def body(**overrides):
    return {"project": "pretrain", "name": "am", "kind": "alertmanager", "url": "https://alertmanager.example",
            "secret": "fine-token", **overrides}


def paths(answer):
    return {e["path"]: e["message"] for e in answer.json()["errors"]}


@pytest.mark.parametrize("secret", ["abc\n", "tok\r\nX-Injected: yes", "tab\there", "bell\x07", "del\x7f", "\rlead"])
def test_a_secret_with_control_characters_is_refused_and_nothing_is_stored(api, owner, secret):
    api.force_login(owner)
    answer = api.post("/api/v1/channels/", body(secret=secret), format="json")
    assert answer.status_code == 400 and "control characters" in paths(answer)["secret"]
    assert secret not in answer.content.decode()
    assert not Channel.objects.exists() and not ChannelChange.objects.exists()


def test_an_edit_to_such_a_secret_keeps_the_old_one(api, owner, project):
    channel = make_channel(project, kind="alertmanager", url="https://alertmanager.example", secret="old-token")
    api.force_login(owner)
    answer = api.patch(f"/api/v1/channels/{channel.pk}/", {"secret": "new-token\n"}, format="json")
    assert answer.status_code == 400 and "secret" in paths(answer)
    channel.refresh_from_db()
    assert channel.secret == "old-token" and ChannelChange.objects.count() == 1


@pytest.mark.parametrize("url", ["https://alertmanager.example/\r\nX-Injected: yes", "https://alertmanager.example/a\nb",
                                 "https://alertmanager.example/\tx", "https://alert\x00manager.example/"])
def test_a_url_with_control_characters_is_refused_and_nothing_is_stored(api, owner, url):
    api.force_login(owner)
    answer = api.post("/api/v1/channels/", body(url=url), format="json")
    assert answer.status_code == 400 and "url" in paths(answer)
    assert not Channel.objects.exists() and not ChannelChange.objects.exists()


def test_the_console_form_refuses_them_too(client, owner):
    client.force_login(owner)
    page = client.post("/channels/new/", {"project": "pretrain", "name": "am", "kind": "alertmanager",
                                          "url": "https://alertmanager.example", "secret": "tok\r\nX-Injected: yes",
                                          "config": "", "enabled": "on"})
    assert page.status_code == 400 and "control characters" in page.content.decode()
    assert not Channel.objects.exists()


@pytest.mark.parametrize("stored", ["abc\n", "tok\r\nX-Injected: yes"])
def test_a_secret_stored_before_the_check_never_reaches_the_log(project, sender, receiver, stored):
    spike_rule(project)
    channel = make_channel(project, kind="alertmanager", url=receiver.url)
    Channel.objects.filter(pk=channel.pk).update(secret=stored)  # as saved before issue 21
    fire(sender)
    [row] = Delivery.objects.filter(channel=channel)
    assert row.status == "failed" and "Bearer" not in row.detail and stored.strip() not in row.detail
    assert row.detail == "a header could not be sent (the channel's secret has characters a header cannot carry)"
    assert receiver.requests == []  # no header was injected into a request either


def test_a_receivers_answer_is_never_in_the_log(project, sender, receiver, teammate, token, api):
    spike_rule(project)
    channel = make_channel(project, url=receiver.url)
    receiver.statuses = [500]  # answered with the body "receiver says no"
    fire(sender)
    [row] = Delivery.objects.filter(channel=channel)
    assert (row.status, row.status_code, row.detail) == ("retrying", 500, "HTTP 500")
    api.force_login(teammate)
    log = api.get(f"/api/v1/channels/{channel.pk}/deliveries/").content.decode()
    assert "HTTP 500" in log and "receiver says no" not in log


class RefusingMailServer:
    """Just enough SMTP to refuse every recipient with a reply that quotes what it was sent."""

    def __init__(self, reply):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn, conn.makefile("rwb") as stream:
            stream.write(b"220 mail.test ESMTP\r\n")
            stream.flush()
            for line in stream:
                verb = line[:4].upper()
                if verb == b"EHLO" or verb == b"HELO":
                    stream.write(b"250 mail.test\r\n")
                elif verb == b"RCPT":
                    stream.write(b"550 5.1.1 " + self.reply + b"\r\n")
                elif verb == b"QUIT":
                    stream.write(b"221 bye\r\n")
                    stream.flush()
                    return
                else:
                    stream.write(b"250 ok\r\n")
                stream.flush()

    def close(self):
        self.listener.close()


def test_a_mail_servers_refusal_is_a_fixed_reason(project, sender, settings):
    server = RefusingMailServer(b"no such user; your login was hunter2")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    try:
        spike_rule(project)
        channel = make_channel(project, kind="email", config={"recipients": ["oncall@example.com"]})
        fire(sender)
    finally:
        server.close()
    [row] = Delivery.objects.filter(channel=channel)
    assert (row.status, row.detail) == ("failed", "the mail server refused the recipients")
