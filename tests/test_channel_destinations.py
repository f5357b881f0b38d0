"""Where a channel may point: internal addresses are refused on save and again at every try, unless the site
lists their network in NOTIFY_ALLOWED_NETWORKS (the tests allow 127.0.0.0/8 and ::1; here it is cleared).

Before issue 21 any http(s) URL was saved, and the test message answered a port scan ("connection refused" vs
"remote disconnected" vs the status and first bytes of the body) for any rule admin.
"""
import ipaddress
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from notifications import senders, tasks
from notifications.models import Channel, ChannelChange, Delivery, Notification
from tests.notify_support import fire, make_channel, spike_rule

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def nothing_allowed(settings):
    settings.NOTIFY_ALLOWED_NETWORKS = ()


def create(api, url, kind="webhook"):
    return api.post("/api/v1/channels/", {"project": "pretrain", "name": "probe", "kind": kind, "url": url},
                    format="json")


@pytest.mark.parametrize("url, why", [
    ("http://127.0.0.1:8000/hook", "loopback address"),
    ("http://localhost:8000/hook", "loopback address"),  # judged on what the name resolves to
    ("http://[::1]/", "loopback address"),
    ("http://169.254.169.254/latest/meta-data/", "link-local address"),
    ("http://[fe80::1]/", "link-local address"),
    ("http://10.0.0.1/", "private address"),
    ("https://192.168.1.20:9093", "private address"),
    ("http://172.16.5.4/", "private address"),
    ("http://[fd00::1]/", "unique-local address"),
    ("http://[::ffff:10.0.0.1]/", "private address"),
    ("http://0.0.0.0:8000/", "unspecified address"),
    ("http://224.0.0.1/", "multicast address"),
    ("http://100.64.0.1/", "reserved address"),
    ("http://240.0.0.1/", "reserved address"),
])
def test_an_internal_destination_is_refused_on_save(api, owner, nothing_allowed, url, why):
    api.force_login(owner)
    answer = create(api, url, kind="alertmanager")
    assert answer.status_code == 400, answer.content
    [error] = answer.json()["errors"]
    assert error["path"] == "url" and why in error["message"] and "NOTIFY_ALLOWED_NETWORKS" in error["message"]
    assert not Channel.objects.exists() and not ChannelChange.objects.exists()


def test_a_public_address_and_an_unresolved_name_are_saved(api, owner, nothing_allowed):
    api.force_login(owner)
    assert create(api, "https://93.184.215.14/hook").status_code == 201
    # A name that does not resolve now is saved: each try resolves it and refuses what is not allowed.
    assert api.post("/api/v1/channels/", {"project": "pretrain", "name": "later", "kind": "slack",
                                          "url": "https://hooks.invalid/services/T0"}, format="json").status_code == 201


def test_an_allowed_network_may_be_sent_to(api, owner, receiver, settings):
    settings.NOTIFY_ALLOWED_NETWORKS = (ipaddress.ip_network("127.0.0.0/8"),)
    api.force_login(owner)
    created = create(api, receiver.url + "/hook")
    assert created.status_code == 201, created.content
    tested = api.post(f"/api/v1/channels/{created.json()['id']}/test/").json()
    assert tested["status"] == "ok" and receiver.bodies()[0]["event"] == "test"


def test_a_destination_that_became_internal_is_refused_at_send(project, sender, receiver, settings):
    spike_rule(project)
    channel = make_channel(project, url=receiver.url, secret="k")  # saved while loopback was allowed
    settings.NOTIFY_ALLOWED_NETWORKS = ()
    fire(sender)
    assert receiver.requests == []
    [row] = Delivery.objects.filter(channel=channel)
    assert (row.status, row.detail, row.status_code) == ("failed", "destination not allowed: loopback address", None)
    assert Notification.objects.get().state == "failed"
    assert tasks.sweep_now()["queued"] == 0


def test_the_test_message_is_no_port_scanner(api, owner, project, receiver, settings):
    """An open port, a closed port and a listening receiver all read the same once their network is not allowed."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        closed = socket.create_server(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]
        closed.close()
        urls = [receiver.url, f"http://127.0.0.1:{silent.getsockname()[1]}", f"http://127.0.0.1:{closed_port}"]
        channels = [make_channel(project, name=f"c{i}", url=url) for i, url in enumerate(urls)]
        settings.NOTIFY_ALLOWED_NETWORKS = ()
        api.force_login(owner)
        answers = [api.post(f"/api/v1/channels/{c.pk}/test/").json() for c in channels]
    assert {(a["status"], a["status_code"], a["detail"]) for a in answers} == {
        ("failed", None, "destination not allowed: loopback address")}
    assert all(a["duration_ms"] < 1000 for a in answers)
    assert receiver.requests == []


def test_one_dns_answer_is_checked_and_connected_to(receiver, monkeypatch, settings):
    """Resolved once per try; the connection goes to the checked address while Host still names the host."""
    real = socket.getaddrinfo
    port = int(receiver.url.rsplit(":", 1)[1])
    answers = [[(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))],
               [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]]
    asked = []

    def rebinding(host, *args, **kwargs):
        if host != "hooks.test":
            return real(host, *args, **kwargs)
        asked.append(host)
        return answers[min(len(asked), len(answers)) - 1]  # a second lookup would get the metadata address

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    outcome = senders.post(f"http://hooks.test:{port}/hook", b"{}", timeout=5)
    assert outcome.ok and asked == ["hooks.test"]
    assert receiver.requests[0]["headers"]["Host"] == f"hooks.test:{port}"


def test_a_name_with_one_internal_address_among_public_ones_is_refused(receiver, monkeypatch, settings):
    settings.NOTIFY_ALLOWED_NETWORKS = (ipaddress.ip_network("127.0.0.0/8"),)
    port = int(receiver.url.rsplit(":", 1)[1])
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))])
    outcome = senders.post(f"http://mixed.test:{port}/hook", b"{}", timeout=5)
    assert (outcome.ok, outcome.retry, outcome.detail) == (False, False, "destination not allowed: private address")
    assert receiver.requests == []


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1:70/"])
def test_only_http_and_https_are_sent_to(url):
    outcome = senders.post(url, b"{}", timeout=2)
    assert not outcome.ok and not outcome.retry and outcome.detail == "only http(s) URLs are sent to"


def start(value, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    env.update({"DJANGO_SETTINGS_MODULE": "opsconsole.settings", "WL_VAR_DIR": str(tmp_path), "NOTIFY_ALLOWED_NETWORKS": value})
    code = "import django; django.setup(); from django.conf import settings; print(settings.NOTIFY_ALLOWED_NETWORKS)"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value", ["10.0.0.0/33", "10.0.0.1/8", "intranet", "10.0.0.0/8;fd00::/8"])
def test_a_bad_allowed_network_stops_the_start_up(value, tmp_path):
    result = start(value, tmp_path)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "NOTIFY_ALLOWED_NETWORKS" in result.stderr


def test_allowed_networks_are_read_from_the_environment(tmp_path):
    result = start(" 10.20.0.0/16, fd12::/64 ,", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(IPv4Network('10.20.0.0/16'), IPv6Network('fd12::/64'))"
    assert start("", tmp_path).stdout.strip() == "()"  # empty by default: nothing internal is allowed


def test_a_channel_whose_host_became_internal_can_be_switched_off_but_not_on(api, owner, project, settings):
    channel = make_channel(project, url="http://127.0.0.1:9/hook")  # saved while loopback was allowed
    settings.NOTIFY_ALLOWED_NETWORKS = ()
    api.force_login(owner)
    off = api.patch(f"/api/v1/channels/{channel.pk}/", {"enabled": False}, format="json")
    assert off.status_code == 200, off.content
    assert Channel.objects.get(pk=channel.pk).enabled is False
    on = api.patch(f"/api/v1/channels/{channel.pk}/", {"enabled": True}, format="json")
    assert on.status_code == 400 and on.json()["errors"][0]["path"] == "url"
    assert Channel.objects.get(pk=channel.pk).enabled is False
