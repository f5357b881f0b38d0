"""One deadline per delivery try: a receiver trickling its answer cannot hold a worker, or a web request, past it.

The receiver here sends one byte every 0.5 s for up to 30 s; with NOTIFY_TIMEOUT_SECONDS=2 a try must end at
the deadline (given a generous margin for a loaded machine), not when the receiver stops. Before issue 21 each
socket read had the timeout, so each byte reset it and the try lasted the receiver's whole 30 s.
"""
import time

import pytest

from notifications import senders, tasks
from notifications.models import Delivery, Notification
from tests.notify_support import fire, make_channel, spike_rule
from tests.outbound_support import Trickle

pytestmark = pytest.mark.django_db

DEADLINE = 2
MARGIN = 6  # far below the receiver's 30 s, generous for a loaded 2-core machine


@pytest.fixture
def trickle():
    t = Trickle(every=0.5, for_seconds=30)
    yield t
    t.close()


def test_a_trickled_answer_ends_the_try_at_its_deadline(trickle):
    started = time.monotonic()
    outcome = senders.post(trickle.url + "/hook", b"{}", timeout=DEADLINE)
    took = time.monotonic() - started
    assert took < DEADLINE + MARGIN, f"the try took {took:.1f} s"
    assert not outcome.ok and outcome.retry and outcome.detail == f"no answer within {DEADLINE} s"
    assert len(trickle.requests) == 1


def test_a_trickled_body_after_a_success_is_cut_at_the_deadline():
    slow = Trickle(every=0.5, for_seconds=30, head=b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", answer=b"x" * 1000)
    try:
        started = time.monotonic()
        outcome = senders.post(slow.url, b"{}", timeout=DEADLINE)
        took = time.monotonic() - started
    finally:
        slow.close()
    assert took < DEADLINE + MARGIN, f"the try took {took:.1f} s"
    assert outcome.ok and outcome.status_code == 200  # the status decides; the body is never waited for past the deadline


def test_a_delivery_try_by_the_task_ends_at_its_deadline(project, sender, trickle, settings):
    settings.NOTIFY_TIMEOUT_SECONDS = DEADLINE
    spike_rule(project)
    channel = make_channel(project, url=trickle.url)
    started = time.monotonic()
    fire(sender)  # eager: the first try runs inline
    took = time.monotonic() - started
    assert took < DEADLINE + MARGIN, f"ingest and the try took {took:.1f} s"
    [row] = Delivery.objects.filter(channel=channel)
    assert (row.status, row.detail) == ("retrying", f"no answer within {DEADLINE} s")
    assert row.duration_ms < (DEADLINE + MARGIN) * 1000
    assert Notification.objects.get().state == "queued"
    assert tasks.sweep_now()["reclaimed"] == 0


def test_the_test_message_answers_within_the_deadline(api, owner, project, trickle, settings):
    settings.NOTIFY_TIMEOUT_SECONDS = DEADLINE
    channel = make_channel(project, kind="alertmanager", url=trickle.url, secret="am-token")
    api.force_login(owner)
    started = time.monotonic()
    tested = api.post(f"/api/v1/channels/{channel.pk}/test/")
    took = time.monotonic() - started
    assert took < DEADLINE + MARGIN, f"the web request took {took:.1f} s"
    assert tested.status_code == 200
    assert (tested.json()["status"], tested.json()["detail"]) == ("failed", f"no answer within {DEADLINE} s")


def test_an_endless_answer_is_read_no_further_than_64_kib():
    # Headers without end, sent as fast as the socket takes them: only 64 KiB are read, long before the deadline.
    endless = Trickle(every=30, for_seconds=30, head=b"HTTP/1.1 200 OK\r\nX-Padding: " + b"p" * 4_000_000, answer=b"\r\n")
    try:
        started = time.monotonic()
        outcome = senders.post(endless.url, b"{}", timeout=20)
        took = time.monotonic() - started
    finally:
        endless.close()
    assert took < 10, f"the try took {took:.1f} s"
    assert not outcome.ok and outcome.detail == "the answer was longer than 64 KiB"
