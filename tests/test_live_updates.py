"""Live updates over websockets: who may listen, what a batch sends, and that a lost membership stops it.

The sockets go through the real ASGI application (origin check, session
cookie, routing), with the in-memory channel layer; the delivery test runs
again against Redis. Async bodies run under asgiref's async_to_sync (no
pytest-asyncio), in transactional tests: consumers reach the database from
other threads, and publishing happens on commit.
"""
import functools
import logging
import os
import uuid

import orjson
import pytest
import redis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.db import transaction
from django.test import Client

from alerts.models import Alert, AlertChange, Rule
from alerts.rules import save_rule
from alerts.tasks import sweep_unevaluated
from ingest.contract import parse_json_batch
from ingest.models import Run
from ingest.service import ingest_batch
from opsconsole.settings import CHANNEL_REDIS_OPTIONS
from opsconsole.asgi import application
from opsconsole.live import collected, project_group, publish, run_group
from opsconsole.models import Membership

RUN_ID = "pretrain/exp-1"  # a "/" in the id, as the HTTP routes allow
RECEIVE_TIMEOUT = 3


def async_test(fn):
    """Run an `async def` test body with asgiref (the project does not use pytest-asyncio)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return async_to_sync(fn)(*args, **kwargs)

    return wrapper


@pytest.fixture
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def redis_layer(settings):
    prefix = f"wl-test-{uuid.uuid4().hex[:12]}"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # The deployment's connection options (settings.CHANNEL_REDIS_OPTIONS), a prefix of this test's own.
            "CONFIG": {"hosts": [{"address": os.environ.get("REDIS_URL", ""), **CHANNEL_REDIS_OPTIONS}],
                       "prefix": prefix},
        }
    }
    yield
    # Only this test's keys. Not the layer's flush(): it also closes, from this event loop, the layer's
    # connections of every other loop, opsconsole.live's sending loop included.
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


def nonfinite_rule(project):
    return save_rule(
        Rule(project=project, name="loss-nonfinite", kind="nonfinite", owner="Pretrain on-call <#pretrain-oncall>",
             scope={"metrics": ["loss"]}, persistence={"points": 1}, diagnostic_url="https://runbooks.example/nonfinite",
             permitted_response="notify"),
        source="test",
    )


def send_batch(project, points, run_id=RUN_ID):
    """A batch through the ingest path; in a transactional test its after-commit work (evaluation) runs at once."""
    body = {"run": {"id": run_id}, "points": points}
    return ingest_batch(project, parse_json_batch(orjson.dumps(body)))


def loss(steps, bad=()):
    return [{"step": s, "metric": "loss", "value": "NaN" if s in bad else 2.0} for s in steps]


def login(user):
    """A logged-in client (its session cookie is what a browser would send with the websocket)."""
    client = Client()
    client.force_login(user)
    return client


def socket_with(path, client=None):
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if client is not None:
        name = django_settings.SESSION_COOKIE_NAME
        headers.append((b"cookie", f"{name}={client.cookies[name].value}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def socket(path, user=None):
    return socket_with(path, None if user is None else await database_sync_to_async(login)(user))


async def open_socket(comm):
    connected, _ = await comm.connect(timeout=RECEIVE_TIMEOUT)
    assert connected
    return comm


async def refusal(comm):
    """The close code a refused socket gets (it is accepted first, so that browsers see the code)."""
    connected, code = await comm.connect(timeout=RECEIVE_TIMEOUT)
    if connected:
        message = await comm.receive_output(RECEIVE_TIMEOUT)
        assert message["type"] == "websocket.close", message
        code = message.get("code")
    await comm.disconnect()
    return code


async def frames(comm, count):
    return [await comm.receive_json_from(RECEIVE_TIMEOUT) for _ in range(count)]


@pytest.fixture
def run(project, memory_layer):
    send_batch(project, loss(range(3)))
    return Run.objects.get(run_id=RUN_ID)


@pytest.mark.django_db(transaction=True)
@async_test
async def test_owner_and_teammate_connect_to_their_run_and_project(run, owner, teammate):
    for user in (owner, teammate):
        for path in (f"/ws/runs/{RUN_ID}/", "/ws/projects/pretrain/"):
            comm = await open_socket(await socket(path, user))
            await comm.send_json_to({"type": "ping"})
            assert await comm.receive_json_from(RECEIVE_TIMEOUT) == {"type": "pong"}
            await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@async_test
async def test_outsider_and_anonymous_are_refused(run, outsider, owner):
    for path in (f"/ws/runs/{RUN_ID}/", "/ws/projects/pretrain/"):
        assert await refusal(await socket(path, outsider)) == 4403
        assert await refusal(await socket(path)) == 4401
    # A run or project that does not exist is refused as one that is not visible: nothing leaks.
    assert await refusal(await socket("/ws/runs/no-such-run/", owner)) == 4403
    assert await refusal(await socket("/ws/projects/vision/", owner)) == 4403


@pytest.mark.django_db(transaction=True)
@async_test
async def test_a_socket_from_another_origin_is_refused(run, owner):
    comm = await socket(f"/ws/runs/{RUN_ID}/", owner)
    comm.scope["headers"] = [(k, b"https://evil.example" if k == b"origin" else v) for k, v in comm.scope["headers"]]
    connected, _ = await comm.connect(timeout=RECEIVE_TIMEOUT)
    assert not connected


async def _batch_reaches_run_and_project_sockets(project, run, teammate):
    await database_sync_to_async(nonfinite_rule)(project)
    run_socket = await open_socket(await socket(f"/ws/runs/{RUN_ID}/", teammate))
    project_socket = await open_socket(await socket("/ws/projects/pretrain/", teammate))

    await database_sync_to_async(send_batch)(project, loss(range(3, 6), bad={4, 5}))

    alert = await database_sync_to_async(Alert.objects.get)()
    for comm in (run_socket, project_socket):
        points, fired, status, incident = await frames(comm, 4)
        assert points == {
            "type": "points", "run": RUN_ID, "receipt": points["receipt"], "min_step": 3, "max_step": 5, "last_step": 5,
            "attempt": 1, "points": 3, "events": 0, "phases": 0, "series": [{"metric": "loss", "component": None}],
        }
        assert fired["type"] == "alert" and fired["run"] == RUN_ID
        assert (fired["change"], fired["step"], fired["by"]) == ("fired", 4, None)
        assert fired["alert"]["id"] == alert.pk
        assert (fired["alert"]["metric"], fired["alert"]["step"], fired["alert"]["state"]) == ("loss", 4, "firing")
        assert fired["alert"]["last_step"] == 5  # the alert as the batch's evaluation committed it
        assert fired["alert"]["rule"]["name"] == "loss-nonfinite"
        assert status == {"type": "run", "run": RUN_ID, "status": "alerting", "previous": "healthy", "last_step": 5,
                          "health": "alerting", "label": "Alerting"}
        # Then its incident, one frame for the incident as a whole.
        assert (incident["type"], incident["change"], incident["incident"]["alerts"]) == ("incident", "opened", [alert.pk])
        assert incident["incident"]["origin"]["alert"] == alert.pk and incident["incident"]["state"] == "firing"

    # The next clean point resolves it: the change and the run's status, in that order; the incident (a
    # non-finite loss: a hard invariant nobody has looked at) now needs review.
    await database_sync_to_async(send_batch)(project, loss([6]))
    for comm in (run_socket, project_socket):
        points, resolved, review, status, incident = await frames(comm, 5)
        assert (points["type"], points["min_step"]) == ("points", 6)
        assert (resolved["change"], resolved["alert"]["id"], resolved["alert"]["state"]) == ("resolved", alert.pk, "resolved")
        # The run now needs review: the inbox's list and the run's word (never "Healthy", alerts/health.py).
        assert review == {"type": "review", "run": RUN_ID, "needs_review": True, "health": "recovered",
                          "label": "Recovered", "runs": [RUN_ID]}
        assert (status["status"], status["previous"], status["label"]) == ("healthy", "alerting", "Recovered")
        assert (incident["change"], incident["incident"]["state"]) == ("state", "needs_review")
        await comm.disconnect()
    assert await database_sync_to_async(AlertChange.objects.count)() == 2


@pytest.mark.django_db(transaction=True)
@async_test
async def test_a_batch_sends_points_then_the_fired_alert_then_the_status(project, run, teammate):
    await _batch_reaches_run_and_project_sockets(project, run, teammate)


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@async_test
async def test_a_batch_reaches_run_and_project_sockets_through_redis(project, teammate, redis_layer):
    assert type(get_channel_layer()).__name__ == "RedisChannelLayer"
    await database_sync_to_async(send_batch)(project, loss(range(3)))
    run = await database_sync_to_async(Run.objects.get)(run_id=RUN_ID)
    await _batch_reaches_run_and_project_sockets(project, run, teammate)


@pytest.mark.django_db(transaction=True)
@async_test
async def test_a_removed_member_stops_hearing_and_is_disconnected_at_the_next_message(project, run, owner, teammate):
    watching = await open_socket(await socket(f"/ws/runs/{RUN_ID}/", owner))
    removed_run = await open_socket(await socket(f"/ws/runs/{RUN_ID}/", teammate))
    removed_project = await open_socket(await socket("/ws/projects/pretrain/", teammate))

    await database_sync_to_async(Membership.objects.filter(user=teammate, project=project).delete)()
    await database_sync_to_async(send_batch)(project, loss([3]))

    for comm in (removed_run, removed_project):
        closed = await comm.receive_output(RECEIVE_TIMEOUT)  # no data frame before it
        assert closed == {"type": "websocket.close", "code": 4403}
        assert await comm.receive_nothing(0.2)
        await comm.disconnect()
    [points] = await frames(watching, 1)
    assert points["type"] == "points"
    await watching.disconnect()


@pytest.mark.django_db(transaction=True)
@async_test
async def test_client_frames_are_answered_after_an_auth_check(project, run, teammate):
    comm = await open_socket(await socket(f"/ws/runs/{RUN_ID}/", teammate))
    await comm.send_json_to({"type": "subscribe", "run": "elsewhere"})
    assert (await comm.receive_json_from(RECEIVE_TIMEOUT))["type"] == "error"
    await comm.send_to(text_data="not json")
    assert (await comm.receive_json_from(RECEIVE_TIMEOUT))["type"] == "error"
    await comm.send_to(bytes_data=b"\x00")
    assert (await comm.receive_json_from(RECEIVE_TIMEOUT))["type"] == "error"

    await database_sync_to_async(Membership.objects.filter(user=teammate, project=project).delete)()
    await comm.send_json_to({"type": "ping"})
    assert await comm.receive_output(RECEIVE_TIMEOUT) == {"type": "websocket.close", "code": 4403}
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@async_test
async def test_a_logged_out_session_is_disconnected_with_4401(project, run, teammate):
    client = await database_sync_to_async(login)(teammate)
    comm = await open_socket(socket_with("/ws/projects/pretrain/", client))
    await database_sync_to_async(client.logout)()  # the session row is gone
    await database_sync_to_async(send_batch)(project, loss([3]))
    assert await comm.receive_output(RECEIVE_TIMEOUT) == {"type": "websocket.close", "code": 4401}
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@async_test
async def test_the_sweep_announces_a_run_that_went_stalled(project, run, owner, settings):
    settings.RUN_STALLED_SECONDS = 1
    await database_sync_to_async(Run.objects.filter(pk=run.pk).update)(last_seen_at=run.last_seen_at.replace(year=2000))
    comm = await open_socket(await socket("/ws/projects/pretrain/", owner))
    await database_sync_to_async(sweep_unevaluated)()
    assert await comm.receive_json_from(RECEIVE_TIMEOUT) == {
        "type": "run", "run": RUN_ID, "status": "stalled", "previous": "healthy", "last_step": 2,
        "health": "stalled", "label": "Stalled"}
    await database_sync_to_async(sweep_unevaluated)()  # already stalled: nothing more to say
    assert await comm.receive_nothing(0.2)
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@async_test
async def test_frames_go_out_after_commit_never_after_a_rollback_and_a_batch_as_one_message(run, memory_layer):
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(run_group(run.pk), channel)

    def rolled_back():
        with pytest.raises(RuntimeError), transaction.atomic():
            publish(run, "run", {"status": "alerting"})
            raise RuntimeError("rollback")

    def committed():
        with transaction.atomic():
            publish(run, "run", {"status": "finished"})
            assert layer.channels.get(channel) is None or layer.channels[channel].empty()  # not before commit

    await database_sync_to_async(rolled_back)()
    await database_sync_to_async(committed)()
    message = await layer.receive(channel)
    assert (message["type"], message["run"], message["project"]) == ("live.message", run.pk, run.project_id)
    assert message["frames"] == [{"type": "run", "run": RUN_ID, "status": "finished"}]
    assert channel not in layer.channels or layer.channels[channel].empty()  # the rolled-back one never went out

    def gathered():  # as one batch's evaluation: one message, without what a rolled-back savepoint published
        with transaction.atomic(), collected():
            publish(run, "points", {"receipt": 1})
            with pytest.raises(RuntimeError), transaction.atomic():
                publish(run, "run", {"status": "alerting"})
                raise RuntimeError("rollback")
            publish(run, "run", {"status": "healthy"})

    await database_sync_to_async(gathered)()
    message = await layer.receive(channel)
    assert [f["type"] for f in message["frames"]] == ["points", "run"]
    assert message["frames"][1]["status"] == "healthy"
    assert channel not in layer.channels or layer.channels[channel].empty()
    assert project_group(run.project_id) == f"project.{run.project_id}"


@pytest.mark.django_db
def test_a_channel_layer_that_is_down_never_breaks_ingest_or_evaluation(sender, project, settings, caplog):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}
    }
    nonfinite_rule(project)
    with caplog.at_level(logging.WARNING, logger="opsconsole.live"):
        response = sender.post({"run": {"id": "offline"}, "points": loss(range(3), bad={2})})
    assert response.status_code == 202
    assert Alert.objects.get().state == "firing"
    assert Run.objects.get(run_id="offline").status == "alerting"
    assert "live update not sent" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_through_the_real_server_a_posted_batch_reaches_a_logged_in_socket(project, token, teammate):
    """uvicorn in-process, the configured channel layer (Redis under CI): HTTP ingest to websocket frame."""
    import httpx
    from websockets.sync.client import connect

    from tests.browser import ConsoleServer

    nonfinite_rule(project)
    client = login(teammate)
    cookie = f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"
    with ConsoleServer() as server:

        def post(points):
            response = httpx.post(server.url + "/api/v1/ingest", json={"run": {"id": RUN_ID}, "points": points},
                                  headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 202, response.text

        post(loss([0]))
        ws_url = server.url.replace("http://", "ws://") + f"/ws/runs/{RUN_ID}/"
        with connect(ws_url, additional_headers={"Cookie": cookie, "Origin": server.url}, open_timeout=5) as ws:
            ws.send('{"type": "ping"}')
            assert orjson.loads(ws.recv(timeout=5)) == {"type": "pong"}
            post(loss(range(1, 3), bad={2}))
            received = [orjson.loads(ws.recv(timeout=5)) for _ in range(3)]
        assert [f["type"] for f in received] == ["points", "alert", "run"]
        assert (received[1]["change"], received[2]["status"]) == ("fired", "alerting")
        with connect(ws_url, additional_headers={"Origin": server.url}, open_timeout=5) as anonymous:
            with pytest.raises(Exception) as closed:
                anonymous.recv(timeout=5)
            assert getattr(closed.value, "rcvd", None) is not None and closed.value.rcvd.code == 4401


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@async_test
async def test_an_idle_socket_on_redis_stays_open_longer_than_the_layers_blocking_receive(project, run, teammate, redis_layer):
    """channels_redis blocks 5 s per receive; a Redis read timeout no longer than that dropped idle sockets."""
    import asyncio

    comm = await open_socket(await socket(f"/ws/runs/{RUN_ID}/", teammate))
    await asyncio.sleep(7)
    await comm.send_json_to({"type": "ping"})
    assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
    await comm.disconnect()
