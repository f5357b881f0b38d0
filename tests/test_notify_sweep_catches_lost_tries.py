"""Messages whose task was lost (a broker outage, a worker killed mid-try) are delivered by the sweep, once."""
from datetime import timedelta
from unittest import mock

from django.utils import timezone

from notifications import tasks
from notifications.models import Delivery, Notification
from tests.notify_support import fire, make_channel, spike_rule


def test_a_message_never_queued_is_sent_by_the_sweep(project, sender, receiver):
    spike_rule(project)
    make_channel(project, url=receiver.url)
    with mock.patch("notifications.tasks.deliver_now"):  # as if the task never reached a worker
        fire(sender)
    assert receiver.requests == [] and Notification.objects.get().state == "queued"

    assert tasks.sweep_now()["queued"] == 1
    assert len(receiver.requests) == 1
    assert tasks.sweep_now()["queued"] == 0  # sent: never again
    assert len(receiver.requests) == 1


def test_a_try_whose_worker_died_is_taken_up_again(project, sender, receiver):
    spike_rule(project)
    make_channel(project, url=receiver.url)
    with mock.patch("notifications.tasks.deliver_now"):
        fire(sender)
    long_ago = timezone.now() - timedelta(minutes=10)
    Notification.objects.update(state="sending", claimed_at=long_ago, tries=1)  # claimed, then the worker was killed

    assert tasks.sweep_now()["reclaimed"] == 1
    notification = Notification.objects.get()
    assert notification.state == "sent" and notification.tries == 2
    assert list(Delivery.objects.values_list("attempt", "status")) == [(2, "ok")]


def test_a_claimed_try_is_not_taken_twice(project, sender, receiver):
    spike_rule(project)
    make_channel(project, url=receiver.url)
    with mock.patch("notifications.tasks.deliver_now"):
        fire(sender)
    pk = Notification.objects.get().pk
    Notification.objects.update(state="sending", claimed_at=timezone.now())  # another worker is on it right now
    assert tasks.deliver_now(pk) is False
    assert tasks.sweep_now() == {"reclaimed": 0, "queued": 0, "refreshed": 0}
    assert receiver.requests == []
