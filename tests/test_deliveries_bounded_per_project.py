"""One project's slow receivers never take every delivery process: at most NOTIFY_MAX_INFLIGHT_PER_PROJECT tries of
one project's messages are in flight at once; a try beyond it waits and is sent once there is room, while other
projects' messages go out meanwhile."""
import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from notifications import tasks
from notifications.models import Notification
from opsconsole.celery import app as celery_app
from tests.conftest import Sender
from tests.notify_support import fire, make_channel, spike_rule


def queued_messages(project, sender, url, channels):
    """One incident's message to each of `channels` channels, queued and not yet tried."""
    spike_rule(project)
    for i in range(channels):
        make_channel(project, name=f"hook-{i}", url=f"{url}/{i}")
    with mock.patch("notifications.tasks.deliver_now"):  # as if their tasks had not reached a worker yet
        fire(sender)
    return list(Notification.objects.filter(channel__project=project).order_by("pk"))


def test_a_try_beyond_the_projects_bound_waits_while_other_projects_send(
        project, other_project, sender, other_token, django_capture_on_commit_callbacks, receiver, settings):
    settings.NOTIFY_MAX_INFLIGHT_PER_PROJECT = 2
    first, second, third = queued_messages(project, sender, receiver.url, channels=3)
    Notification.objects.filter(pk__in=[first.pk, second.pk]).update(state="sending", claimed_at=timezone.now(), tries=1)

    assert tasks.deliver_now(third.pk) is False  # two of its project's tries are on their way
    third.refresh_from_db()
    assert (third.state, third.tries, receiver.requests) == ("queued", 0, [])

    # Another project's message is not held by it.
    other_sender = Sender(APIClient(), other_token, django_capture_on_commit_callbacks)
    spike_rule(other_project)
    make_channel(other_project, url=receiver.url + "/other")
    fire(other_sender, run_id="other-run")
    assert [r["path"] for r in receiver.requests] == ["/other"]

    # A claim its worker left behind (older than any try can run) holds no room: the waiting try goes out.
    Notification.objects.filter(pk=first.pk).update(claimed_at=timezone.now() - timedelta(seconds=tasks.reclaim_after() + 1))
    assert tasks.deliver_now(third.pk) is True
    assert [r["path"] for r in receiver.requests] == ["/other", "/2"]


def test_a_refused_try_is_asked_again_shortly_by_a_worker(project, sender, receiver, settings):
    settings.NOTIFY_MAX_INFLIGHT_PER_PROJECT = 1
    first, second = queued_messages(project, sender, receiver.url, channels=2)
    Notification.objects.filter(pk=first.pk).update(state="sending", claimed_at=timezone.now(), tries=1)
    celery_app.conf.task_always_eager = False  # as under a worker: the try is queued again, not dropped
    with mock.patch.object(tasks.deliver, "apply_async") as queued:
        assert tasks.deliver_now(second.pk) is False
    assert queued.call_args.args == ((second.pk,),)
    assert queued.call_args.kwargs["countdown"] == tasks.INFLIGHT_RECHECK_SECONDS


@pytest.mark.postgres
def test_concurrent_claims_never_exceed_the_bound(transactional_db, project, sender, receiver, settings):
    settings.NOTIFY_MAX_INFLIGHT_PER_PROJECT = 2
    messages = queued_messages(project, sender, receiver.url, channels=6)
    start = threading.Barrier(len(messages))
    answers = []
    count = tasks.in_flight

    def slow_count(*args):
        # Every claim counts at the same moment and takes its time deciding: without a lock all six see room.
        n = count(*args)
        time.sleep(0.2)
        return n

    def claim(pk):
        try:
            Notification.objects.exists()  # connected before the race starts
            start.wait(timeout=30)
            answers.append(tasks._claim(pk, timezone.now()))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(m.pk,)) for m in messages]
    with mock.patch("notifications.tasks.in_flight", side_effect=slow_count):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert len(answers) == 6
    assert Notification.objects.filter(state="sending").count() == 2
    assert answers.count(tasks.BUSY) == 4
