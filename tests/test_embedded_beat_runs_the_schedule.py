"""The embedded console's beat (opsconsole/beat.py): every entry of CELERY_BEAT_SCHEDULE runs at its interval or
crontab in the serving process, a task that raises is logged and runs again when next due, one process of a console
runs it (a lock in VAR_DIR), and an Alertmanager channel says on its page when nothing refreshes its pushes."""
import datetime as dt
import logging
import threading
import time

import pytest
from celery.schedules import crontab

from notifications.models import ChannelKind
from opsconsole import beat
from opsconsole.celery import app as celery_app
from tests.notify_support import make_channel

ran = []
ran_lock = threading.Lock()


@celery_app.task(name="tests.embedded_beat.record")
def record(label):
    with ran_lock:
        ran.append(label)


@celery_app.task(name="tests.embedded_beat.explode")
def explode():
    with ran_lock:
        ran.append("explode")
    raise RuntimeError("this task always fails")


@pytest.fixture(autouse=True)
def _nothing_ran():
    ran.clear()
    yield
    ran.clear()


class Clock:
    def __init__(self, at):
        self.at = at

    def __call__(self):
        return self.at


def test_every_entry_of_the_schedule_is_run_by_the_embedded_beat(settings, tmp_path):
    """Read from settings, so an entry added later (queue-unevaluated-batches, apply-retention) is covered too."""
    embedded = beat.Beat(lock_path=tmp_path / "beat.lock")
    assert [e.name for e in embedded.entries] == list(settings.CELERY_BEAT_SCHEDULE)
    assert {"apply-retention", "queue-unevaluated-batches", "notification-sweep", "open-due-reviews"} <= {
        e.name for e in embedded.entries}
    for entry in embedded.entries:
        assert embedded._task(entry.task).name == entry.task


def test_due_tasks_run_at_their_interval_and_a_raising_one_does_not_stop_the_rest(tmp_path, caplog):
    clock = Clock(dt.datetime(2026, 3, 2, 10, 0, 0, tzinfo=dt.timezone.utc))  # a Monday
    schedule = {
        "boom": {"task": "tests.embedded_beat.explode", "schedule": 10.0},
        "often": {"task": "tests.embedded_beat.record", "schedule": 10.0, "args": ("often",)},
        "hourly": {"task": "tests.embedded_beat.record", "schedule": crontab(minute=41), "args": ("hourly",)},
    }
    embedded = beat.Beat(schedule, now=clock, lock_path=tmp_path / "beat.lock")
    assert embedded.acquire()

    clock.at += dt.timedelta(seconds=5)
    wait = embedded.tick()
    assert ran == []  # nothing is due before its interval
    assert 0 < wait <= 5

    clock.at += dt.timedelta(seconds=5)
    with caplog.at_level(logging.ERROR, logger="opsconsole.beat"):
        embedded.tick()
    assert ran == ["explode", "often"]
    assert "boom (tests.embedded_beat.explode) failed" in caplog.text

    clock.at += dt.timedelta(seconds=10)
    embedded.tick()
    assert ran == ["explode", "often", "explode", "often"]  # the raising task is tried again, the others go on

    ran.clear()
    clock.at = dt.datetime(2026, 3, 2, 10, 41, 0, tzinfo=dt.timezone.utc)
    embedded.tick()
    assert sorted(ran) == ["explode", "hourly", "often"]  # a missed interval runs once, not once per interval missed
    ran.clear()
    clock.at += dt.timedelta(seconds=10)
    embedded.tick()
    assert sorted(ran) == ["explode", "often"]  # the crontab entry waits for the next 41st minute


def test_the_thread_runs_the_schedule_until_stopped_and_survives_raising_tasks(tmp_path):
    schedule = {
        "boom": {"task": "tests.embedded_beat.explode", "schedule": 0.1},
        "often": {"task": "tests.embedded_beat.record", "schedule": 0.1, "args": ("often",)},
    }
    embedded = beat.Beat(schedule, lock_path=tmp_path / "beat.lock")
    embedded.start()
    deadline = time.monotonic() + 10
    while ran.count("often") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert embedded.running
    embedded.stop(timeout=10)
    assert ran.count("often") >= 3 and ran.count("explode") >= 3
    assert not embedded.running
    stopped_at = len(ran)
    time.sleep(0.3)
    assert len(ran) == stopped_at  # stopped: nothing runs after stop()
    assert beat.Beat({}, lock_path=tmp_path / "beat.lock").acquire()  # and its lock is free for another process


def test_one_process_of_a_console_runs_the_schedule(tmp_path):
    """Several server processes (uvicorn --workers) on one VAR_DIR: one holds the lock, the others stand by."""
    first = beat.Beat({}, lock_path=tmp_path / "beat.lock")
    second = beat.Beat({}, lock_path=tmp_path / "beat.lock")
    assert first.acquire()
    assert not second.acquire()
    first.release()
    assert second.acquire()  # takes over once the first process is gone
    second.release()


def test_the_beat_is_the_servers_job_only_when_celery_is_eager(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    celery_app.conf.task_always_eager = False  # Redis: `celery beat` runs the schedule, not the web process
    assert beat.start() is None
    celery_app.conf.task_always_eager = True
    settings.EMBEDDED_BEAT = False
    assert beat.start() is None


@pytest.fixture
def channel_page(client, owner, project):
    client.force_login(owner)
    names = []

    def page(kind, url):
        channel = make_channel(project, kind=kind, url=url, name=f"{kind}-{len(names)}")
        names.append(channel.pk)
        response = client.get(f"/channels/{channel.pk}/")
        assert response.status_code == 200
        return response.content.decode()

    return page


def test_an_alertmanager_channel_says_when_nothing_refreshes_its_pushes(channel_page, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.EMBEDDED_BEAT = False
    html = channel_page(ChannelKind.ALERTMANAGER, "https://alertmanager.example")
    assert 'id="pushes-not-refreshed"' in html
    assert "This console does not refresh its pushes: an incident still firing resolves in Alertmanager 6 minutes" in html
    assert "EMBEDDED_BEAT is off" in html
    # A webhook has nothing to refresh.
    assert 'id="pushes-not-refreshed"' not in channel_page(ChannelKind.WEBHOOK, "https://hooks.example/x")


def test_an_alertmanager_channel_is_quiet_while_a_process_runs_the_beat(channel_page, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    html = channel_page(ChannelKind.ALERTMANAGER, "https://alertmanager.example")
    assert "no process of this console runs its periodic work" in html  # served here without a beat

    running = beat.Beat({}, lock_path=tmp_path / "beat.lock")  # as the serving process holds it
    assert running.acquire()
    try:
        html = channel_page(ChannelKind.ALERTMANAGER, "https://alertmanager.example/other")
        assert 'id="pushes-not-refreshed"' not in html
    finally:
        running.release()


def test_with_redis_the_page_warns_until_celery_beats_sweep_has_run(channel_page, settings):
    """Production: `celery beat` is a process of its own; its notification sweep's time, in the shared cache, says it runs."""
    from django.core.cache import cache

    from notifications.tasks import sweep_now

    cache.delete(beat.SWEPT_KEY)
    celery_app.conf.task_always_eager = False  # as with Redis (the suite's fixture puts it back)
    html = channel_page(ChannelKind.ALERTMANAGER, "https://alertmanager.example")
    assert "is `celery beat` running?" in html
    sweep_now()
    assert 'id="pushes-not-refreshed"' not in channel_page(ChannelKind.ALERTMANAGER, "https://alertmanager.example/b")
    cache.delete(beat.SWEPT_KEY)
