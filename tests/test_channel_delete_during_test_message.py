"""Deleting a channel while its test message is on its way: whichever comes first, no 500 and nothing half-saved.

A test message waits for the receiver (up to the timeout) inside the request; a rule admin may delete the channel
meanwhile. The try is logged only if the channel is still there (under the channel's row lock, which a delete takes
first too), else the test answers 409; a delete that comes while the try is being logged waits for it and takes it
with the channel. Before, the log row was written for a channel that was gone: a ForeignKeyViolation, a 500.
"""
import threading

import httpx
import pytest
from django.db import connection, connections
from django.db.models.signals import post_save

from notifications.channels import delete_channel
from notifications.models import Channel, ChannelChange, Delivery
from opsconsole.models import PersonalToken
from tests.factories import client_for
from tests.notify_support import make_channel
from tests.worker_support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

# Generous: the machine running the suite may be loaded; nothing here waits this long unless something is broken.
PATIENCE = 30


@pytest.fixture
def slow_channel(project, receiver, settings):
    settings.NOTIFY_TIMEOUT_SECONDS = 60  # the receiver answers when the test says so, well inside this
    receiver.hold = threading.Event()
    return make_channel(project, name="slow-hook", url=receiver.url)


def in_background(fn):
    answers = []

    def run():
        try:
            answers.append(fn())
        finally:
            connections.close_all()  # this thread's own database connection, if it opened one

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, answers


@pytest.mark.both_databases  # the PostgreSQL run and bin/test's SQLite one
def test_api_delete_while_the_test_message_waits_for_the_receiver(live_server, owner, slow_channel, receiver):
    auth = {"Authorization": f"Bearer {PersonalToken.issue(owner)[1]}"}
    with httpx.Client(base_url=live_server.url, headers=auth, timeout=PATIENCE * 2) as tester, \
            httpx.Client(base_url=live_server.url, headers=auth, timeout=PATIENCE * 2) as deleter:
        thread, answers = in_background(lambda: tester.post(f"/api/v1/channels/{slow_channel.pk}/test/"))
        assert wait_until(lambda: receiver.requests, PATIENCE), "the test message never reached the receiver"
        assert deleter.delete(f"/api/v1/channels/{slow_channel.pk}/").status_code == 204
        receiver.hold.set()
        thread.join(PATIENCE * 2)
    [answer] = answers
    assert answer.status_code == 409, answer.text
    assert "deleted while its test message was sent" in answer.json()["errors"][0]["message"]
    assert not Channel.objects.exists() and not Delivery.objects.exists()
    assert list(ChannelChange.objects.values_list("action", flat=True)) == ["created", "deleted"]


@pytest.mark.both_databases
def test_page_delete_while_the_test_message_waits_for_the_receiver(owner, slow_channel, receiver):
    thread, answers = in_background(lambda: client_for(owner).post(f"/channels/{slow_channel.pk}/test/"))
    try:
        assert wait_until(lambda: receiver.requests, PATIENCE), "the test message never reached the receiver"
        deleted = client_for(owner).post(f"/channels/{slow_channel.pk}/delete/", follow=True)
        assert deleted.status_code == 200 and "Channel slow-hook deleted." in deleted.content.decode()
    finally:
        receiver.hold.set()
        thread.join(PATIENCE * 2)
    [answer] = answers
    assert answer.status_code == 409
    assert "was deleted while its test message was being sent" in " ".join(answer.content.decode().split())
    assert not Channel.objects.exists() and not Delivery.objects.exists()


@pytest.mark.both_databases
def test_deleting_a_channel_twice_at_once_records_one_deletion(api, owner, project):
    channel = make_channel(project, name="twice", url="https://hooks.example/x")
    api.force_login(owner)
    assert api.delete(f"/api/v1/channels/{channel.pk}/").status_code == 204
    # The second of two deletes that both found the channel: its row is gone by the time it takes the lock.
    assert delete_channel(channel, user=owner, source="api") is False
    assert list(ChannelChange.objects.values_list("action", flat=True)) == ["created", "deleted"]


@pytest.mark.postgres
def test_a_delete_while_the_try_is_being_logged_waits_and_takes_it_along(live_server, owner, project, receiver, settings):
    """The other order, on PostgreSQL (where the ForeignKeyViolation showed): the test message is writing its log row
    when the delete comes. The delete waits for the channel's row lock, then deletes the new row with the channel."""
    channel = make_channel(project, name="hook", url=receiver.url)
    logging, release = threading.Event(), threading.Event()

    def hold_the_log_write(sender, instance, created, **kwargs):
        if instance.test:  # inside send_test's transaction, the row written, not yet committed
            logging.set()
            release.wait(PATIENCE * 2)

    def delete_waits_for_a_lock():
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
                           [connection.settings_dict["NAME"]])
            return cursor.fetchone()[0] > 0

    auth = {"Authorization": f"Bearer {PersonalToken.issue(owner)[1]}"}
    post_save.connect(hold_the_log_write, sender=Delivery)
    try:
        with httpx.Client(base_url=live_server.url, headers=auth, timeout=PATIENCE * 2) as tester, \
                httpx.Client(base_url=live_server.url, headers=auth, timeout=PATIENCE * 2) as deleter:
            testing, tested = in_background(lambda: tester.post(f"/api/v1/channels/{channel.pk}/test/"))
            assert logging.wait(PATIENCE), "the test message never logged its try"
            deleting, deleted = in_background(lambda: deleter.delete(f"/api/v1/channels/{channel.pk}/"))
            assert wait_until(delete_waits_for_a_lock, PATIENCE), "the delete did not wait for the test's row lock"
            release.set()
            testing.join(PATIENCE * 2)
            deleting.join(PATIENCE * 2)
    finally:
        release.set()
        post_save.disconnect(hold_the_log_write, sender=Delivery)
    assert tested[0].status_code == 200 and tested[0].json()["status"] == "ok", tested[0].text
    assert deleted[0].status_code == 204, deleted[0].text
    assert not Channel.objects.exists() and not Delivery.objects.exists()
