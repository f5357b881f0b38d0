"""With Redis down, ingest stays fast: one quick failed attempt, then the broker is left alone for a back-off.

Batches stored meanwhile are left to the sweep, which queues them once Redis
is back. Live frames to a channel layer that is down are treated the same way.
`benchmarks/broker_down.py` prints the latencies.
"""
import logging
import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection
from kombu import Connection

from alerts.tasks import evaluate_batch, sweep_unevaluated
from alerts import tasks
from ingest.models import BatchReceipt, Run
from opsconsole import live
from opsconsole.breaker import Breaker
from opsconsole.celery import app as celery_app

CLOSED_PORT = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def batch(run_id, step):
    return {"run": {"id": run_id}, "points": [{"step": step, "metric": "loss", "value": 2.0}]}


def use_broker(url):
    celery_app.conf.broker_url = url
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(Breaker, "clock", staticmethod(fake))
    return fake


@pytest.fixture
def broker_down(monkeypatch):
    """The real broker client against a closed port; counts publishes and connection attempts (calling through)."""
    conf = celery_app.conf
    saved = conf.task_always_eager, conf.broker_url
    conf.task_always_eager = False
    use_broker(CLOSED_PORT)
    tasks.BROKER.reset()
    calls = {"publish": 0, "connect": 0}
    publish, connect = evaluate_batch.apply_async, Connection._connection_factory

    def counted_publish(*args, **kwargs):
        calls["publish"] += 1
        return publish(*args, **kwargs)

    def counted_connect(self):
        calls["connect"] += 1
        return connect(self)

    monkeypatch.setattr(evaluate_batch, "apply_async", counted_publish)
    monkeypatch.setattr(Connection, "_connection_factory", counted_connect)
    yield calls
    conf.task_always_eager = saved[0]
    use_broker(saved[1])
    tasks.BROKER.reset()


@pytest.mark.django_db
def test_with_the_broker_down_one_ingest_tries_it_once_and_the_next_ones_skip_it(sender, broker_down, clock):
    first = sender.post(batch("offline", 0))
    assert first.status_code == 202
    # One connection attempt, no retry loop (it used to retry for 2 s on every ingest).
    assert broker_down == {"publish": 1, "connect": 1}
    for step in range(1, 20):
        assert sender.post(batch("offline", step)).status_code == 202
    assert broker_down == {"publish": 1, "connect": 1}
    assert BatchReceipt.objects.filter(evaluated_at__isnull=True).count() == 20  # all stored, left to the sweep

    clock.now += 5.0  # the back-off has passed: the next ingest probes once, fails, and the wait doubles
    assert sender.post(batch("offline", 20)).status_code == 202
    assert broker_down == {"publish": 2, "connect": 2}
    clock.now += 5.0
    assert sender.post(batch("offline", 21)).status_code == 202
    assert broker_down["publish"] == 2
    clock.now += 5.0
    assert sender.post(batch("offline", 22)).status_code == 202
    assert broker_down["publish"] == 3


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_once_redis_is_back_the_sweep_queues_the_batches_and_a_worker_evaluates_them(sender, broker_down, clock):
    import os

    for step in range(5):
        assert sender.post(batch("outage", step)).status_code == 202
    assert broker_down["publish"] == 1
    assert BatchReceipt.objects.filter(evaluated_at__isnull=True).count() == 5

    use_broker(os.environ["REDIS_URL"])  # Redis is back; the web process's breaker still has it down
    assert sender.post(batch("outage", 5)).status_code == 202
    assert broker_down["publish"] == 1
    assert sweep_unevaluated(grace_seconds=0) == 6  # beat's sweep, in a worker: it tries the broker regardless
    connection.close()
    with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and BatchReceipt.objects.filter(evaluated_at__isnull=True).exists():
            time.sleep(0.1)
    assert not BatchReceipt.objects.filter(evaluated_at__isnull=True).exists()
    assert Run.objects.get(run_id="outage").last_step == 5
    assert broker_down["publish"] >= 7  # the sweep's 6 (a worker past its drain deadline may queue a run's rest)
    # The sweep's success told this process's breaker too: ingest queues again at once.
    before = broker_down["publish"]
    assert sender.post(batch("outage", 6)).status_code == 202
    assert broker_down["publish"] == before + 1


@pytest.mark.django_db
def test_with_the_channel_layer_down_live_frames_are_tried_once_per_back_off(sender, settings, clock, caplog, monkeypatch):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                    "CONFIG": {"hosts": [{"address": CLOSED_PORT, **settings.CHANNEL_REDIS_OPTIONS}]}}
    }
    sends = []
    real = live._send_all

    async def counted(layer, messages):
        sends.append(len(messages))
        return await real(layer, messages)

    monkeypatch.setattr(live, "_send_all", counted)
    with caplog.at_level(logging.WARNING, logger="opsconsole.live"):
        for step in range(10):
            assert sender.post(batch("no-live", step)).status_code == 202
    assert Run.objects.get(run_id="no-live").last_step == 9  # evaluation went on
    assert len(sends) == 1
    assert "channel layer: unreachable" in caplog.text
    clock.now += 5.0
    sender.post(batch("no-live", 10))
    assert len(sends) == 2
