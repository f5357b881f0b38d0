"""One message, one delivery: a try is ended at its task's soft time limit however slowly its receiver answers, and its
process killed at the hard limit where nothing else can end it; the sweep never takes back a claim whose try may still
be running, and a try that lost its claim never overwrites the try that took it over (notifications/tasks.py)."""
import os
from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from notifications import tasks
from notifications.message import DeliveryOutcome
from notifications.models import Delivery, Notification
from opsconsole.celery import app as celery_app
from tests.notify_support import fire, make_channel, spike_rule
from tests.trickle_support import TricklingReceiver
from tests.worker_support import ROOT, wait_until


def queued_message(project, sender, url):
    """An incident's message to one channel, queued and not yet tried."""
    spike_rule(project)
    make_channel(project, url=url)
    with mock.patch("notifications.tasks.deliver_now"):  # as if its task had not reached a worker yet
        fire(sender)
    return Notification.objects.get()


@pytest.mark.postgres
@pytest.mark.redis
def test_a_trickling_receiver_gets_one_try_at_a_time_each_ended_at_its_limit(celery_worker, sender, project, settings):
    # A byte every 0.5 s: a timeout per socket read (1 s) never ends the try; the whole answer takes ~35 s.
    receiver = TricklingReceiver(interval=0.5)
    settings.NOTIFY_TIMEOUT_SECONDS = 1
    limits = {"NOTIFY_TIMEOUT_SECONDS": 1, "NOTIFY_RETRY_SECONDS": 1, "NOTIFY_ALLOWED_NETWORKS": "127.0.0.0/8"}
    try:
        celery_app.conf.task_always_eager = True
        notification = queued_message(project, sender, receiver.url)
        celery_app.conf.task_always_eager = False
        with celery_worker(pool="prefork", **limits) as worker:
            assert tasks.queue_delivery(notification.pk)
            assert wait_until(lambda: receiver.in_flight() == 1, timeout=60), worker.output()[-3000:]
            # While the try runs, the sweep leaves its claim alone, even as late as its hard limit.
            assert tasks.sweep_now()["reclaimed"] == 0
            assert tasks.sweep_now(now=timezone.now() + timedelta(seconds=tasks.time_limit()))["reclaimed"] == 0

            first_try = lambda: Delivery.objects.filter(notification=notification, attempt=1).first()
            assert wait_until(first_try, timeout=25), f"the try was never ended\n{worker.output()[-3000:]}"
            assert first_try().status == "retrying"
            assert first_try().duration_ms < (tasks.soft_time_limit() + 3) * 1000, worker.output()[-5000:]
            assert wait_until(lambda: not receiver.connections[0].open, timeout=10)  # the worker hung up

            assert wait_until(lambda: len(receiver.connections) >= 2, timeout=30), worker.output()[-3000:]
            assert receiver.overlapping() == []
    finally:
        receiver.close()
    assert receiver.overlapping() == []
    assert not Delivery.objects.filter(notification=notification, status="ok").exists()


def test_the_sweep_takes_back_only_a_claim_no_try_can_still_hold(project, sender, receiver):
    notification = queued_message(project, sender, receiver.url)
    claimed_ago = lambda seconds: Notification.objects.update(
        state="sending", claimed_at=timezone.now() - timedelta(seconds=seconds), tries=1)

    claimed_ago(tasks.time_limit() + 1)  # its try may still be running: at its hard limit, not yet killed
    assert tasks.sweep_now()["reclaimed"] == 0
    assert receiver.requests == []

    claimed_ago(tasks.reclaim_after() + 1)  # its worker was killed: no try holds it
    assert tasks.sweep_now()["reclaimed"] == 1
    notification.refresh_from_db()
    assert (notification.state, notification.tries, len(receiver.requests)) == ("sent", 2, 1)


def test_a_try_that_lost_its_claim_does_not_overwrite_the_one_that_took_it(project, sender, receiver):
    notification = queued_message(project, sender, receiver.url)
    real_send = tasks.senders.send
    calls = []

    def send(target, message):
        calls.append(target)
        if len(calls) == 1:
            # This try stalls past every limit (as a frozen worker would); the sweep takes its claim back and
            # the next try delivers.
            Notification.objects.update(claimed_at=timezone.now() - timedelta(seconds=tasks.reclaim_after() + 1))
            assert tasks.sweep_now()["reclaimed"] == 1
            return DeliveryOutcome(ok=False, retry=True, detail="timed out")
        return real_send(target, message)

    with mock.patch("notifications.tasks.senders.send", side_effect=send):
        assert tasks.deliver_now(notification.pk) is False

    notification.refresh_from_db()
    assert (notification.state, notification.tries) == ("sent", 2)  # the stalled try's "retry" did not undo it
    assert len(receiver.requests) == 1
    assert tasks.sweep_now()["queued"] == 0  # and nothing is left to send again
    assert len(receiver.requests) == 1


# Loaded by the worker under test (its sitecustomize): the first try hangs where no soft limit reaches it, as a
# resolver stuck in getaddrinfo does (a C call: Python's signal handlers wait for it to return).
HANGING_FIRST_TRY = '''
import os
import time

from celery.signals import worker_process_init


@worker_process_init.connect
def _first_try_hangs(**kwargs):
    from notifications import senders

    real_send = senders.send

    def send(target, message):
        try:
            fd = os.open(os.environ["HANG_FLAG"], os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return real_send(target, message)
        os.close(fd)
        while True:
            try:
                time.sleep(1)
            except BaseException:
                pass

    senders.send = send
'''


@pytest.mark.postgres
@pytest.mark.redis
def test_a_try_past_its_hard_limit_is_killed_and_sent_again_only_by_the_sweep(celery_worker, sender, project, receiver,
                                                                                settings, tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HANGING_FIRST_TRY)
    settings.NOTIFY_TIMEOUT_SECONDS = 1
    env = {"NOTIFY_TIMEOUT_SECONDS": 1, "NOTIFY_ALLOWED_NETWORKS": "127.0.0.0/8", "HANG_FLAG": tmp_path / "hung",
           "PYTHONPATH": f"{hook}{os.pathsep}{ROOT}"}
    celery_app.conf.task_always_eager = True
    notification = queued_message(project, sender, receiver.url)
    celery_app.conf.task_always_eager = False
    with celery_worker(pool="prefork", **env) as worker:
        assert tasks.queue_delivery(notification.pk)
        assert wait_until(lambda: (tmp_path / "hung").exists(), timeout=60), worker.output()[-3000:]
        killed = lambda: "Hard time limit" in worker.output()
        assert wait_until(killed, timeout=tasks.time_limit() + 20), f"the try was never killed\n{worker.output()[-3000:]}"
        notification.refresh_from_db()
        assert notification.state == "sending" and not Delivery.objects.exists()  # killed before it could say
        assert tasks.sweep_now()["reclaimed"] == 0  # a claim this young might still be a running try's

        # Once no try can hold it, the sweep sends it again: the one delivery.
        Notification.objects.update(claimed_at=timezone.now() - timedelta(seconds=tasks.reclaim_after() + 1))
        assert tasks.sweep_now()["reclaimed"] == 1
        delivered = lambda: Delivery.objects.filter(notification=notification, status="ok").exists()
        assert wait_until(delivered, timeout=60), worker.output()[-3000:]
    assert len(receiver.requests) == 1
    assert list(Delivery.objects.values_list("attempt", "status")) == [(2, "ok")]
