"""A receiver answering 5xx is tried again with back-off, each try a delivery-log row, until it takes the message;
a 4xx fails at once, and the console shows it."""
from datetime import timedelta

from django.utils import timezone

from notifications import tasks
from notifications.models import Delivery, Notification
from tests.factories import client_for
from tests.notify_support import fire, make_channel, spike_rule


def the_wait_passes():
    """What waiting until the next try is due does to the queue (the sweep and the task read the clock)."""
    Notification.objects.filter(state="queued").update(next_try_at=timezone.now() - timedelta(seconds=1))


def log(channel):
    return list(Delivery.objects.filter(channel=channel).order_by("id").values_list("attempt", "status", "status_code"))


def test_5xx_is_retried_with_backoff_then_delivered(project, sender, receiver, settings):
    settings.NOTIFY_RETRY_SECONDS = 30
    spike_rule(project)
    channel = make_channel(project, url=receiver.url)
    receiver.statuses = [503, 502]

    fire(sender)  # ingest answered; the first try ran and failed
    notification = Notification.objects.get()
    assert (notification.state, notification.tries) == ("queued", 1)
    first_wait = notification.next_try_at - timezone.now()
    assert timedelta(seconds=25) < first_wait <= timedelta(seconds=30)

    assert tasks.sweep_now()["queued"] == 0  # not due yet: nothing is tried early
    the_wait_passes()
    tasks.sweep_now()
    notification.refresh_from_db()
    second_wait = notification.next_try_at - timezone.now()
    assert timedelta(seconds=55) < second_wait <= timedelta(seconds=60)  # the wait doubles

    the_wait_passes()
    tasks.sweep_now()
    assert log(channel) == [(1, "retrying", 503), (2, "retrying", 502), (3, "ok", 200)]
    assert len(receiver.requests) == 3
    notification.refresh_from_db()
    assert notification.state == "sent"


def test_an_unreachable_receiver_is_retried_until_the_tries_run_out(project, sender, receiver, settings):
    settings.NOTIFY_MAX_TRIES = 2
    spike_rule(project)
    url = receiver.url
    receiver.close()  # nothing listens: connection refused
    channel = make_channel(project, url=url)
    fire(sender)
    the_wait_passes()
    tasks.sweep_now()
    assert [row[:2] for row in log(channel)] == [(1, "retrying"), (2, "failed")]
    assert "unreachable" in Delivery.objects.filter(channel=channel).first().detail
    assert Notification.objects.get().state == "failed"


def test_4xx_fails_at_once_and_shows_on_the_console(project, owner, teammate, sender, receiver):
    spike_rule(project)
    channel = make_channel(project, name="team-hook", url=receiver.url)
    receiver.statuses = [401]
    fire(sender)
    assert log(channel) == [(1, "failed", 401)]
    assert Notification.objects.get().state == "failed"
    assert tasks.sweep_now()["queued"] == 0  # never tried again

    page = client_for(teammate).get("/channels/")
    assert page.status_code == 200
    assert 'id="delivery-failures"' in page.content.decode() and "team-hook" in page.content.decode()
    detail = client_for(teammate).get(f"/channels/{channel.pk}/").content.decode()
    assert 'class="delivery-failed"' in detail and "HTTP 401" in detail
    assert "receiver says no" not in detail  # the receiver's own words are never shown back (issue 21)
