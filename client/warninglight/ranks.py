"""Which process of a multi-process job (torchrun, DDP, Accelerate, Lightning `strategy="ddp"`) sends what.

By default one sender per job: global rank 0 sends everything, every other rank gets a `Quiet` watch whose
calls do nothing (no thread, no hooks, no file). Every rank runs the same script, and the console takes a
step that a series sends twice for a restart: N ranks each sending the job's loss make one run of N
attempts with N losses a step.

With per-rank signals on (`watch(..., per_rank=True)`, or `WARNINGLIGHT_PER_RANK=1`), every rank sends its
own signals as components of the run: run-level values as component `rank<N>` and component-level ones
(health) as `rank<N>/<component>`, with only the run line's id; rank 0 alone sends the job-level series
(component-less values, phases, the run's identity). Each per-rank series is a distinct series, so ranks
sending the same step never look like a restart. A resumed job's ranks each re-send their steps; whichever
reaches the console first opens the new attempt, and rank 0's `restart` phase declares it (ingest/service.py).
"""
from __future__ import annotations

import os

TRUE = {"1", "true", "yes", "on"}


def env_rank(environ=None) -> int:
    """The global rank from `RANK` (torchrun, Accelerate, Lightning), else `LOCAL_RANK`, else 0."""
    environ = os.environ if environ is None else environ
    for name in ("RANK", "LOCAL_RANK"):
        value = environ.get(name)
        if value not in (None, ""):
            try:
                return max(0, int(value))
            except ValueError:
                return 0
    return 0


def env_world_size(environ=None) -> int:
    environ = os.environ if environ is None else environ
    try:
        return max(1, int(environ.get("WORLD_SIZE") or 1))
    except ValueError:
        return 1


def env_per_rank(environ=None) -> bool:
    environ = os.environ if environ is None else environ
    return str(environ.get("WARNINGLIGHT_PER_RANK", "")).strip().lower() in TRUE


def resolve(rank=None, world_size=None, per_rank=None):
    """(rank, world_size, per_rank), each given or read from the environment."""
    rank = env_rank() if rank is None else max(0, int(rank))
    world_size = env_world_size() if world_size is None else max(1, int(world_size))
    per_rank = env_per_rank() if per_rank is None else bool(per_rank)
    return rank, max(world_size, rank + 1), per_rank


def component_of(rank: int, component=None) -> str:
    """The per-rank component: `rank3` for a run-level value, `rank3/layers.2` for a component's."""
    return f"rank{rank}" if component is None else f"rank{rank}/{component}"


class Quiet:
    """The watch of a rank that sends nothing: every call returns at once, nothing is kept."""

    phases = False
    should_stop = False
    spool_path = None
    rejected_path = None
    sending = False

    def __init__(self, run_id, rank=0, world_size=1):
        self.run_id = run_id
        self.rank = rank
        self.world_size = world_size
        self.per_rank = False

    def log(self, step, metrics=None, *, component=None, **values):
        pass

    def phase(self, name, step=None):
        pass

    def restart(self, step):
        pass

    def event(self, step, component, condition, magnitude, detail=None):
        pass

    def _health_points(self, step, points, when=None):
        pass

    def _phase_at(self, name, step, when):
        pass

    @property
    def actions(self):
        return []

    @property
    def stats(self):
        return {"queued": 0, "enqueued": 0, "requests": 0, "sent_points": 0, "sent_events": 0, "sent_phases": 0,
                "duplicates": 0, "repeated_steps": 0, "retries": 0, "spooled": 0, "refused": 0, "rejected": 0,
                "dropped": 0, "lost": 0, "console_down": False}

    def flush(self, timeout=10.0):
        return True

    def close(self, flush_timeout=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"<warninglight.Watch run={self.run_id!r} rank={self.rank} quiet (rank 0 sends)>"
