"""The embedded console's beat: CELERY_BEAT_SCHEDULE run in the serving process when Celery is eager (no Redis).

Production runs `celery beat` beside its workers. The embedded console (bin/run: SQLite, eager Celery) has no
beat process, and without one nothing refreshes Alertmanager pushes (a firing incident would resolve there
NOTIFY_ALERTMANAGER_REFRESH_SECONDS × 3 after its one push), retries deliveries, opens due reviews or applies
retention. So the server starts one thread (opsconsole/asgi.py, on the ASGI lifespan's startup) that runs every
entry of the schedule, read from settings so that new entries are covered, at its own interval or crontab
(celery's schedule objects decide what is due). Each run is the task applied eagerly, on the thread's own
database connections, closed after it; a task that raises is logged and run again when next due.

One process of a console runs it: the thread holds an flock on VAR_DIR/beat.lock. bin/run serves one process;
a server with several workers (uvicorn --workers) has one of them run the schedule while the others' threads
wait to take over if it ends. EMBEDDED_BEAT=0 turns it off, and the channels that depend on it say so.
"""
import copy
import fcntl
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from importlib import import_module
from pathlib import Path

from celery.schedules import maybe_schedule
from django.conf import settings
from django.core.cache import cache
from django.db import connections

log = logging.getLogger(__name__)

# The longest the thread sleeps: how soon it notices a stop, and how often a standby tries the lock.
MAX_SLEEP_SECONDS = 5.0
# Where a production beat's notification sweep leaves its time (notifications/tasks.py), shared through Redis.
SWEPT_KEY = "wl:notifications:swept-at"


@dataclass
class Entry:
    name: str
    task: str
    schedule: object  # a celery schedule: is_due(last_run_at) -> (due, seconds to the next check)
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    last_run_at: datetime | None = None


def entries(schedule: dict, app, now) -> list[Entry]:
    """The schedule's entries with their schedules judged on `now` (a copy: the settings' objects stay as they are)."""
    made = []
    for name, spec in schedule.items():
        sched = copy.copy(maybe_schedule(spec["schedule"], app=app))
        sched.nowfun = now
        made.append(Entry(name=name, task=spec["task"], schedule=sched, args=tuple(spec.get("args", ())),
                          kwargs=dict(spec.get("kwargs", {}))))
    return made


class Beat:
    """Runs due entries, one at a time, on the calling thread (tick) or a thread of its own (start/stop)."""

    def __init__(self, schedule: dict | None = None, *, app=None, now=None, lock_path: Path | None = None):
        if app is None:
            from opsconsole.celery import app
        self.app = app
        self.now = now or app.now
        self.entries = entries(settings.CELERY_BEAT_SCHEDULE if schedule is None else schedule, app, self.now)
        self.lock_path = Path(lock_path) if lock_path else Path(settings.VAR_DIR) / "beat.lock"
        self._lock_fd = None
        self._stop = threading.Event()
        self._thread = None

    # --- the lock: one process of a console runs the schedule ---------------------------------------------------

    def acquire(self) -> bool:
        if self._lock_fd is not None:
            return True
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd
        # Intervals count from when this process took over, as celery beat counts from its start.
        started = self.now()
        for entry in self.entries:
            entry.last_run_at = started
        return True

    def release(self):
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the only descriptor of the open file releases the flock
            self._lock_fd = None

    @property
    def holds_lock(self) -> bool:
        return self._lock_fd is not None

    # --- running ----------------------------------------------------------------------------------------------

    def tick(self) -> float:
        """Run every entry that is due; seconds until the next may be."""
        wait = MAX_SLEEP_SECONDS
        for entry in self.entries:
            if self._stop.is_set():
                break
            if entry.last_run_at is None:
                entry.last_run_at = self.now()
            due, next_in = entry.schedule.is_due(entry.last_run_at)
            if due:
                entry.last_run_at = self.now()
                self.run(entry)
                due, next_in = entry.schedule.is_due(entry.last_run_at)
            wait = min(wait, max(float(next_in), 0.0))
        return wait

    def run(self, entry: Entry) -> bool:
        """Apply the entry's task here; False when it raised (logged: the next run is at its next due time)."""
        try:
            task = self._task(entry.task)
            task.apply(args=entry.args, kwargs=entry.kwargs, throw=True)
            return True
        except Exception:
            log.exception("embedded beat: %s (%s) failed; it runs again when next due", entry.name, entry.task)
            return False
        finally:
            if threading.current_thread() is self._thread:
                # The thread's own connections, never held between runs: a lost one would fail every later run,
                # and one left open holds a database session for nothing between runs.
                connections.close_all()

    def _task(self, name):
        if name not in self.app.tasks:
            import_module(name.rpartition(".")[0])  # tasks are registered as their modules are imported
        return self.app.tasks[name]

    def loop(self):
        while not self._stop.is_set():
            try:
                wait = self.tick() if self.acquire() else MAX_SLEEP_SECONDS
            except Exception:  # never the thread's end: the schedule itself failed (a clock, a lock file)
                log.exception("embedded beat: a tick failed")
                wait = MAX_SLEEP_SECONDS
            self._stop.wait(max(0.05, min(wait, MAX_SLEEP_SECONDS)))
        self.release()

    def start(self):
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self.loop, name="embedded-beat", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = 30):
        """Stop after the task running now, if any (a task is never interrupted)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.release()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


_beat: Beat | None = None
_beat_guard = threading.Lock()


def eager() -> bool:
    from opsconsole.celery import app

    return bool(app.conf.task_always_eager)


def start() -> Beat | None:
    """The serving process's beat, started once (the ASGI lifespan's startup); None when it is not this process's job."""
    global _beat
    if not eager() or not settings.EMBEDDED_BEAT:
        return None
    with _beat_guard:
        if _beat is None:
            _beat = Beat()
        _beat.start()
        return _beat


def stop():
    global _beat
    with _beat_guard:
        beat, _beat = _beat, None
    if beat is not None:
        beat.stop()


async def lifespan(scope, receive, send):
    """ASGI lifespan: the beat starts with the server (when it is this process's job) and stops with it."""
    import asyncio

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                start()
            except Exception:  # the console still serves; its Alertmanager channels say nothing periodic runs
                log.exception("embedded beat: could not start")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await asyncio.to_thread(stop)  # waits for a task running now, off the event loop
            await send({"type": "lifespan.shutdown.complete"})
            return


def _lock_held_elsewhere(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the probe's own lock, if it got one
    return False


@dataclass(frozen=True)
class PeriodicWork:
    runs: bool
    reason: str = ""


def periodic_work() -> PeriodicWork:
    """Whether this console's periodic tasks (refreshes, sweeps, due reviews, retention) run, and if not why."""
    if eager():
        if not settings.EMBEDDED_BEAT:
            return PeriodicWork(False, "EMBEDDED_BEAT is off, so the embedded console runs no periodic work")
        if _beat is not None and _beat.running and _beat.holds_lock:
            return PeriodicWork(True)
        if _lock_held_elsewhere(Path(settings.VAR_DIR) / "beat.lock"):
            return PeriodicWork(True)
        return PeriodicWork(False, "no process of this console runs its periodic work (it is served without "
                                   "bin/run's server, or its beat has stopped)")
    # With Redis, `celery beat` is a process of its own: its notification sweep leaves its time in the shared cache.
    try:
        swept = cache.get(SWEPT_KEY)
    except Exception:  # the cache is down: no claim either way
        return PeriodicWork(True)
    late = 3 * settings.NOTIFY_SWEEP_SECONDS + 60
    if swept is None or time.time() - swept > late:
        return PeriodicWork(False, f"no notification sweep has run in the last {late} s: is `celery beat` running?")
    return PeriodicWork(True)


def note_sweep():
    """Called by the notification sweep: what periodic_work() reads where beat is a process of its own."""
    try:
        cache.set(SWEPT_KEY, time.time(), None)
    except Exception:
        pass  # the cache is down: the page may warn, the sweep goes on
