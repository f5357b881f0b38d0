"""Exports streaming at once are bounded per project and per token: beyond, 429 with Retry-After and the limit named.

A slot is given back when the export's stream ends, is closed, or its client goes away; with Redis the slots
are shared by every web process, and a process that dies holding one frees it when its lease ends.
"""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from exports import limits
from tests.export_support import body_of, strict_lines
from tests.factories import client_for
from tests.slow_reader_support import SmallBuffersServer, many_events
from tests.worker_support import wait_until

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_slots_left_over():
    def clear():
        limits.LOCAL.reset()
        if django_settings.REDIS_URL:
            client = limits.SHARED.client()
            for key in client.scan_iter(limits.PREFIX + "*"):
                client.delete(key)

    clear()
    yield
    clear()


def refused(response, setting):
    assert response.status_code == 429, response.status_code
    assert int(response["Retry-After"]) >= 1
    [error] = response.json()["errors"]
    assert setting in error["message"] and "retry" in error["message"]
    return error["message"]


def went_away(response):
    """What a WSGI server does when its client goes away mid-stream: the response is closed, its content unread."""
    next(iter(response.streaming_content))
    response.close()


@pytest.fixture
def in_process(settings):
    settings.REDIS_URL = None  # the embedded console: slots counted in this process


# transactional_db: closing a response gives its connection back, as a server does.
def test_a_projects_exports_beyond_its_limit_wait_until_one_ends(transactional_db, in_process, settings, exported, owner, teammate, outsider, api, token):
    settings.EXPORT_MAX_CONCURRENT_PER_PROJECT = 2
    settings.EXPORT_MAX_CONCURRENT_PER_TOKEN = 5
    first = client_for(owner).get("/api/v1/projects/pretrain/export/")
    second = client_for(teammate).get("/api/v1/runs/exp-a/export/")  # a run's export counts against its project
    assert (first.status_code, second.status_code) == (200, 200)

    message = refused(api.get("/api/v1/projects/pretrain/export/", HTTP_AUTHORIZATION=f"Bearer {token}"),
                      "EXPORT_MAX_CONCURRENT_PER_PROJECT")
    assert "'pretrain'" in message and "at most 2" in message
    assert body_of(client_for(outsider).get("/api/v1/projects/vision/export/"))  # another project is not held up

    assert strict_lines(body_of(first))  # read to its end: the slot is back
    third = api.get("/api/v1/projects/pretrain/export/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert third.status_code == 200
    refused(client_for(owner).get("/api/v1/projects/pretrain/export/"), "EXPORT_MAX_CONCURRENT_PER_PROJECT")
    went_away(second)
    assert body_of(client_for(owner).get("/api/v1/projects/pretrain/export/"))
    body_of(third)


@pytest.mark.django_db
def test_one_token_cannot_take_every_slot_of_its_project(in_process, settings, exported, owner, api, token):
    settings.EXPORT_MAX_CONCURRENT_PER_PROJECT = 3
    settings.EXPORT_MAX_CONCURRENT_PER_TOKEN = 1
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    held = api.get("/api/v1/projects/pretrain/export/", **auth)
    assert held.status_code == 200
    message = refused(api.get("/api/v1/runs/exp-a/export/", **auth), "EXPORT_MAX_CONCURRENT_PER_TOKEN")
    assert "at most 1" in message
    assert body_of(client_for(owner).get("/api/v1/projects/pretrain/export/"))  # a person on the same project still can
    body_of(held)
    assert body_of(api.get("/api/v1/runs/exp-a/export/", **auth))


def take_in_another_process(project, lease_seconds):
    """A web process elsewhere takes a slot of `project` in Redis and dies without giving it back."""
    code = ("import django, os; django.setup()\n"
            "from types import SimpleNamespace as N\n"
            "from exports import limits\n"
            f"limits.LEASE_SECONDS = {lease_seconds}\n"
            f"limits.take(N(auth=None, user=N(pk=-1)), N(pk={project.pk}, slug={project.slug!r}))\n"
            "os._exit(0)\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def held_in_redis(project) -> int:
    return limits.SHARED.client().zcard(f"{limits.PREFIX}project:{project.pk}")


@pytest.mark.redis
@pytest.mark.django_db
def test_slots_are_shared_by_the_web_processes_and_freed_when_one_dies(settings, exported, owner, project):
    settings.EXPORT_MAX_CONCURRENT_PER_PROJECT = 1
    take_in_another_process(project, lease_seconds=3)
    assert held_in_redis(project) == 1
    refused(client_for(owner).get("/api/v1/projects/pretrain/export/"), "EXPORT_MAX_CONCURRENT_PER_PROJECT")
    # Its lease is not renewed by anyone: it ends, and the project's exports go on.
    assert wait_until(lambda: answers_200(owner), 30, interval=0.5)


def answers_200(user):
    response = client_for(user).get("/api/v1/projects/pretrain/export/")
    if response.status_code == 200:
        body_of(response)
        return True
    return False


@pytest.mark.redis
@pytest.mark.django_db
def test_a_slot_held_by_a_process_alive_stays_held_past_its_lease(settings, monkeypatch, exported, owner, project):
    settings.EXPORT_MAX_CONCURRENT_PER_PROJECT = 1
    monkeypatch.setattr(limits, "LEASE_SECONDS", 3.0)
    held = client_for(owner).get("/api/v1/projects/pretrain/export/")
    assert held.status_code == 200
    assert not wait_until(lambda: held_in_redis(project) == 0, 8)  # renewed: more than two leases went by
    refused(client_for(owner).get("/api/v1/projects/pretrain/export/"), "EXPORT_MAX_CONCURRENT_PER_PROJECT")
    body_of(held)
    assert held_in_redis(project) == 0


@pytest.mark.redis
def test_a_reader_that_goes_away_mid_stream_frees_its_slot(transactional_db, settings, project, sender, token, owner):
    settings.EXPORT_MAX_CONCURRENT_PER_PROJECT = 1
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    many_events(project, sender)  # more than the sockets hold: the stream stays open while the reader waits
    with SmallBuffersServer() as server, socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(f"GET /api/v1/projects/pretrain/export/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Authorization: Bearer {token}\r\n\r\n".encode())
        assert sock.recv(64).startswith(b"HTTP/1.1 200")
        assert held_in_redis(project) == 1
        refused(client_for(owner).get("/api/v1/projects/pretrain/export/"), "EXPORT_MAX_CONCURRENT_PER_PROJECT")
        sock.close()  # gone, the export unread
        assert wait_until(lambda: held_in_redis(project) == 0, 20), "the slot outlived its reader"
        assert body_of(client_for(owner).get("/api/v1/projects/pretrain/export/"))
