"""`watch()`: the object a training loop talks to.

Everything the training thread calls (`log`, `phase`, `event`) appends plain
tuples to a bounded deque and returns: no validation, no conversion, no I/O, no
locks. Values are converted with `float()` in the sender thread, so a 0-d
tensor costs the training thread nothing at `log()` time (a CUDA tensor's
device-to-host copy happens in the sender thread). Nothing here raises into the
training loop once `watch()` has returned.
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import subprocess
import time

from . import ranks, wire
from .sender import EVENT, PHASE, POINT, RESET, Sender

log = logging.getLogger("warninglight")

_time = time.time


def git_code_rev(cwd=None, timeout=2.0):
    """`git rev-parse HEAD` of the working directory, or None (no git, not a repository, too slow)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except Exception:
        return None
    rev = out.stdout.strip()
    if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,64}", rev):
        return rev
    return None


class Watch:
    """One training run's connection to the console. Made by `warninglight.watch(...)`.

    In a multi-process job (warninglight/ranks.py) a rank other than 0 gets a `ranks.Quiet` watch instead,
    unless per-rank signals are on.
    """

    sending = True  # False on a rank's `ranks.Quiet` watch

    def __new__(cls, run_id=None, *args, rank=None, world_size=None, per_rank=None, **options):
        rank, world_size, per_rank = ranks.resolve(rank, world_size, per_rank)
        if rank != 0 and not per_rank:
            return ranks.Quiet(run_id, rank, world_size)
        return super().__new__(cls)

    def __init__(self, run_id, url=None, token=None, *, model=None, phases=True, optimizer=None, health_every=10,
                 config=None, data_snapshot=None, budget=None, code_rev=None, name=None, tags=None,
                 spool_dir=None, batch_points=10_000, flush_seconds=5.0, max_queue=200_000, timeout=5.0,
                 retries=5, backoff=0.5, probe_seconds=5.0, flush_timeout=10.0, rank=None, world_size=None,
                 per_rank=None):
        self._closed = True  # until fully built: close() and __del__ stay harmless
        self._health = None
        self.rank, self.world_size, self.per_rank = ranks.resolve(rank, world_size, per_rank)
        # Job-level series (component-less values, phases, the run's identity) come from rank 0 alone.
        self._job_level = self.rank == 0
        self._rank_component = ranks.component_of(self.rank) if self.per_rank else None
        url = url if url is not None else os.environ.get("WARNINGLIGHT_URL") or None
        token = token if token is not None else os.environ.get("WARNINGLIGHT_TOKEN") or None
        run_id, changed = wire.sanitize_run_id(run_id)
        if changed:
            log.warning("warninglight: run_id changed to %r to fit the contract ([A-Za-z0-9._:/-], 1 to 128 characters)", run_id)
        self.run_id = run_id
        if code_rev is None:
            code_rev = git_code_rev()
        elif code_rev is False:
            code_rev = None
        if self._job_level:
            self.run, problems = wire.run_object(run_id, name=name, code_rev=code_rev, data_snapshot=data_snapshot,
                                                 config=config, budget=budget, tags=tags)
        else:  # the identity is the job's, sent by rank 0: another rank's differing config would read as a change
            self.run, problems = {"id": run_id}, []
        for problem in problems:
            log.warning("warninglight: %s", problem)
        self.phases = bool(phases) and self._job_level
        self.flush_timeout = flush_timeout
        spool_name = run_id.replace("/", "_") + (f".rank{self.rank}" if self.world_size > 1 else "")
        self._sender = Sender(self.run, url=url, token=token, spool_dir=spool_dir, batch_points=batch_points,
                              flush_seconds=flush_seconds, max_queue=max_queue, timeout=timeout,
                              retries=retries, backoff=backoff, probe_seconds=probe_seconds, spool_name=spool_name)
        self._queue = self._sender.queue
        self._last_step = None
        if url is None:
            log.warning("warninglight: no url (nor WARNINGLIGHT_URL): telemetry of run %s is spooled to %s", run_id,
                        self._sender.spool.directory)
        elif token is None:
            log.warning("warninglight: no token (nor WARNINGLIGHT_TOKEN): the console will refuse the batches; they are spooled")
        self._sender.start()
        self._closed = False
        atexit.register(self.close)  # a plain object never closed still flushes at exit
        if model is not None:
            self._attach_health(model, health_every, optimizer)

    def _attach_health(self, model, every, optimizer):
        try:
            from . import health
        except ImportError as exc:
            log.warning("warninglight: per-component health (model=) needs PyTorch: %s; continuing without it", exc)
            return
        try:
            self._health = health.Health(self, model, every=every, optimizer=optimizer)
        except ImportError as exc:
            log.warning("warninglight: per-component health (model=) needs PyTorch: %s; continuing without it", exc)
        except Exception as exc:
            log.warning("warninglight: could not attach the health hooks (%r); continuing without them", exc)

    # ---- the training loop's calls --------------------------------------------------------------
    def log(self, step, metrics=None, *, component=None, **values):
        """Queue points at `step`: `wl.log(step, loss=2.3, lr=3e-4)`, `wl.log(step, {"eval/loss": 2.1})`,
        `wl.log(step, component="layers.3", grad_norm=0.7)`. Never raises, never blocks."""
        if self._closed:
            return
        if component is None and self._health is not None:
            # Health first: its points (the causes) are queued before the step's loss (the symptom), so a
            # flush between the two never lets the console see the loss of a step without its causes.
            try:
                given = {**metrics, **values} if isinstance(metrics, dict) and metrics else values
                self._health.on_log(step, given)  # the values as given (tensors not converted)
            except Exception:
                log.exception("warninglight: the health hooks failed; they are switched off for this run")
                self._disable_health()
        if self._rank_component is not None:
            self._log_per_rank(step, metrics, component, values)
            return
        try:
            when = _time()
            append = self._queue.append
            n = 0
            if metrics:
                for metric, value in metrics.items():
                    if type(value) is not float and hasattr(value, "detach"):
                        value = value.detach()  # keep no autograd graph alive in the queue
                    append((POINT, step, metric, component, value, when))
                    n += 1
            for metric, value in values.items():
                if type(value) is not float and hasattr(value, "detach"):
                    value = value.detach()
                append((POINT, step, metric, component, value, when))
                n += 1
            self._sender.enqueued += n
            self._last_step = step
        except Exception as exc:
            self._sender.reject("log", f"log() could not queue its points: {exc!r}")

    def _log_per_rank(self, step, metrics, component, values):
        """log() with per-rank signals on: run-level values under `rank<N>` (and, from rank 0, also as the job's),
        a component's under `rank<N>/<component>`."""
        mine = self._rank_component
        if component is None:
            components = (None, mine) if self._job_level else (mine,)
        else:
            components = (f"{mine}/{component}",)
        try:
            when = _time()
            append = self._queue.append
            n = 0
            for given in (metrics or {}, values):
                for metric, value in given.items():
                    if type(value) is not float and hasattr(value, "detach"):
                        value = value.detach()
                    for target in components:
                        append((POINT, step, metric, target, value, when))
                        n += 1
            self._sender.enqueued += n
            self._last_step = step
        except Exception as exc:
            self._sender.reject("log", f"log() could not queue its points: {exc!r}")

    def phase(self, name, step=None):
        """Queue a phase entry ("warmup", "steady", "lr_decay", "eval", "checkpoint", "data_refresh",
        "restart", "cooldown", or free text) at `step`, by default the last logged step (0 before any).
        Phases are the job's: on a rank other than 0 (per-rank signals) they are not sent."""
        if self._closed:
            return
        if step is None:
            step = self._last_step if self._last_step is not None else 0
        if not self._job_level:
            if name == "restart":  # this rank's own series may send their steps again from here on
                self._queue.append((RESET, step))
                self._sender.enqueued += 1
            return
        self._queue.append((PHASE, step, name, _time()))
        self._sender.enqueued += 1

    def _phase_at(self, name, step, when):
        """A phase written at `when` (Unix seconds), not now: `warninglight follow` sends a log's phases after the fact."""
        if self._closed:
            return
        self._queue.append((PHASE, step, name, when))
        self._sender.enqueued += 1

    def restart(self, step):
        """The job went back to a checkpoint in this process and logs `step` (the first step after the
        checkpoint) and the steps after it again: a `restart` phase at `step`, from which the console keeps
        the re-sent steps as a new attempt. Without it a step logged again is a repeat, and not sent."""
        self.phase("restart", step)

    def event(self, step, component, condition, magnitude, detail=None):
        """Queue a health event: `condition` is one of the contract's eight (warninglight.CONDITIONS)."""
        if self._closed:
            return
        if step is None:
            step = self._last_step if self._last_step is not None else 0
        if self._rank_component is not None:
            component = ranks.component_of(self.rank, component)
        self._queue.append((EVENT, step, component, condition, magnitude, _time(), detail))
        self._sender.enqueued += 1

    def _health_points(self, step, points, when=None):
        """For the health hooks (and `warninglight follow`, which gives the time the value was written):
        `points` is an iterable of (metric, component, value) at `step`."""
        if self._closed:
            return
        try:
            when = _time() if when is None else when
            append = self._queue.append
            n = 0
            rank = self.rank if self._rank_component is not None else None
            for metric, component, value in points:
                if rank is not None:
                    component = ranks.component_of(rank, component)
                append((POINT, step, metric, component, value, when))
                n += 1
            self._sender.enqueued += n
        except Exception as exc:
            self._sender.reject("health", f"health points could not be queued: {exc!r}")

    # ---- what the console said -------------------------------------------------------------------
    @property
    def should_stop(self) -> bool:
        """True once an ingest response carried a "stop" action. The client never stops anything itself."""
        return self._sender.should_stop

    @property
    def actions(self) -> list:
        """Every distinct action the console has sent so far, oldest first (a copy)."""
        return list(self._sender.actions)

    @property
    def stats(self) -> dict:
        s = self._sender
        counts = s.counts
        return {
            "queued": len(s.queue),
            "enqueued": s.enqueued,
            "requests": counts["requests"],
            "sent_points": counts["sent_points"],
            "sent_events": counts["sent_events"],
            "sent_phases": counts["sent_phases"],
            "duplicates": counts["duplicates"],
            "repeated_steps": counts["repeated_steps"],
            "retries": counts["retries"],
            "spooled": counts["spooled"],
            "refused": counts["refused"],
            "rejected": counts["rejected"],
            "dropped": s.dropped(),
            "lost": counts["lost"],
            "console_down": s.down,
        }

    @property
    def spool_path(self):
        """The spool file written so far (a pathlib.Path), or None if nothing was spooled."""
        return self._sender.spool.path

    @property
    def rejected_path(self):
        """The file of batches the console refused as invalid (HTTP 400/422), or None."""
        return self._sender.rejected_spool.path

    # ---- lifetime ------------------------------------------------------------------------------
    def flush(self, timeout=10.0) -> bool:
        """Block until everything logged so far is sent (or spooled); False if `timeout` passed first."""
        try:
            return self._sender.flush(timeout)
        except Exception:
            return False

    def close(self, flush_timeout=None):
        """Send or spool what is queued (waiting at most `flush_timeout` seconds), stop the thread.
        Closing twice is fine."""
        if self._closed:
            return
        self._closed = True
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        if self._health is not None:
            health, self._health = self._health, None
            self._closed = False  # let the hooks' last points in
            try:
                health.close()
            except Exception:
                log.exception("warninglight: closing the health hooks failed")
            self._closed = True
        try:
            self._sender.stop(self.flush_timeout if flush_timeout is None else flush_timeout)
        except Exception:
            log.exception("warninglight: closing the sender failed")

    def _disable_health(self):
        health, self._health = self._health, None
        if health is not None:
            try:
                health.close()
            except Exception:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        rank = f" rank={self.rank}{' per-rank' if self.per_rank else ''}" if self.world_size > 1 else ""
        return f"<warninglight.Watch run={self.run_id!r}{rank} closed={self._closed}>"


def watch(run_id, url=None, token=None, **options) -> Watch:
    """Watch a training run: `with warninglight.watch(run_id=..., url=..., token=...) as wl: ...`.

    In a multi-process job only global rank 0 sends (`RANK`, else `LOCAL_RANK`, else 0; or `rank=`); the
    other ranks get a watch whose calls do nothing, unless `per_rank=True` (or `WARNINGLIGHT_PER_RANK=1`).

    See the package README for every option.
    """
    return Watch(run_id, url, token, **options)
