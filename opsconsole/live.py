"""Live updates: what the console's websockets hear, sent to one group per run and one per project.

`publish(run, kind, frame)` hands a frame to the channel layer once the
current database transaction commits (at once outside one), so a client never
hears of data it cannot read yet, and never of data that was rolled back. A
channel layer that is down (Redis unreachable) is logged and swallowed: live
updates are a convenience, ingest and evaluation must not notice them fail.
Inside `collected()` (the evaluation of one batch) the frames are gathered and
go out after commit as one group message per run, so listeners are checked
once per batch, not once per alert.

Frames as the browser receives them, one websocket message each (`type` is
the kind, `run` the run id):

    {"type": "points", "run": "<run id>", "receipt": <batch receipt id>,
     "min_step": int|null, "max_step": int|null, "last_step": int|null,
     "attempt": int, "points": int, "events": int, "phases": int,
     "series": [{"metric": str, "component": str|null}, ...]}
        a batch was stored and evaluated; `series` are those it added points to.
    {"type": "alert", "run": "<run id>", "change": "fired"|"extended"|"resolved"|"acknowledged"|"muted"|"verdict"|"unmuted",
     "step": int|null, "at": ISO time, "by": username|null, "note": str, ...other fields of the change row (e.g. "verdict"),
     "alert": {... as alerts.wire.alert_as_dict gives it, as the transaction committed it ...}}
        one per AlertChange row (alerts/changes.py record_change).
    {"type": "incident", "run": "<run id>", "change": "opened"|"joined"|"origin"|"state"|"acknowledged"|"verdict"|"muted",
     "changes": [every change of this one message, the first being `change`], "at": ISO time, "by": username|null,
     "note": str, "incident": {... as alerts.incidents.incident_as_dict gives it, as the transaction committed it ...}}
        one per incident each time evaluation groups alerts into it or its state follows its alerts, and one per
        action a person takes on it (alerts/incidents.py); each of its alerts' own changes still has its `alert` frame.
    {"type": "run", "run": "<run id>", "status": "healthy"|"alerting"|"stalled"|"finished",
     "previous": str|null, "last_step": int|null, "health": str, "label": str}
        the run's status changed; `health` and `label` are what the console shows for it (alerts/health.py: never
        "Healthy" while an incident is open or something of it waits for review).
    {"type": "review", "run": "<run id>", "needs_review": bool, "health": str, "label": str,
     "runs": [run ids of the run's project that need review, sorted]}
        the run's "needs review" mark may have changed (an alert fired, resolved or was looked at, a decision named
        it); `runs` is the project's list the inbox shows as "needs review". At most one per run per message.

Group messages (between processes, not for the browser):
    {"type": "live.message", "run": <run pk>, "project": <project pk>, "frames": [frame, ...]}
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import weakref
from collections import defaultdict
from contextlib import contextmanager

from asgiref.sync import async_to_sync
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from opsconsole.breaker import Breaker

log = logging.getLogger(__name__)

KINDS = ("points", "alert", "run", "incident", "review")
# Kinds of which only the last of a run counts: earlier ones of the same message are dropped before being built.
LATEST_ONLY = ("review",)
# The consumers' handler for group messages (`type` "live.message" calls `live_message`).
HANDLER = "live.message"
# How long one send may take before it counts as a failure (an unreachable Redis host can hang).
SEND_TIMEOUT_SECONDS = 2.0

# channel layer -> its breaker: after a failure, sends skip the layer for a growing back-off, so an
# outage costs one failed send per back-off, not one per message (opsconsole/breaker.py).
_breakers = weakref.WeakKeyDictionary()
_breakers_lock = threading.Lock()
_local = threading.local()  # .pending: the frames gathered by collected() in this thread, else None


def run_group(run_pk: int) -> str:
    """Group names must be ASCII and under 100 characters: run ids are neither guaranteed, pks are."""
    return f"run.{int(run_pk)}"


def project_group(project_pk: int) -> str:
    return f"project.{int(project_pk)}"


def publish(run, kind: str, frame) -> None:
    """Send `frame` (type `kind`) to the run's and its project's groups after the transaction commits.

    `frame` is a dict, or a callable returning one: it is called at commit, so
    in-memory objects it reads (an alert extended by later points of the same
    batch) are sent as they were committed. `run` needs pk, project_id and run_id.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown live message kind {kind!r}")
    item = ((run.pk, run.project_id), {"type": kind, "run": run.run_id}, frame)
    pending = getattr(_local, "pending", None)
    if pending is not None:
        # Gathered at commit too, so a savepoint rolled back inside collected() drops its frames.
        transaction.on_commit(lambda: pending.append(item))
        return
    transaction.on_commit(lambda: send_now([item]))


@contextmanager
def collected():
    """Gather what is published inside; send it after commit as one message per run (nothing if it raises)."""
    if getattr(_local, "pending", None) is not None:
        yield  # nested: the outer block sends
        return
    _local.pending = pending = []
    try:
        yield
    finally:
        _local.pending = None
    # Registered after every frame's own hook, so at commit it runs once they have all been gathered.
    transaction.on_commit(lambda: pending and send_now(pending))


def send_now(items) -> bool:
    """Build and send frames ((run pk, project pk), head, frame) to their groups; False (logged) on failure."""
    from channels.layers import get_channel_layer

    messages = {}
    latest = {(head["type"], group_pks): i for i, (group_pks, head, _) in enumerate(items) if head["type"] in LATEST_ONLY}
    items = [item for i, item in enumerate(items) if latest.get((item[1]["type"], item[0]), i) == i]
    _prefetch([frame for _, _, frame in items])
    for group_pks, head, frame in items:
        try:
            body = _json_safe({**head, **(frame() if callable(frame) else frame)})
        except Exception:  # noqa: BLE001 - a bad frame is a bug to log, not a reason to fail the commit's other work
            log.exception("live %s frame for run %s could not be built", head.get("type"), head.get("run"))
            continue
        message = messages.setdefault(group_pks, {"type": HANDLER, "run": group_pks[0], "project": group_pks[1], "frames": []})
        message["frames"].append(body)
    if not messages:
        return False
    try:
        layer = get_channel_layer()
    except Exception:  # noqa: BLE001 - a misconfigured layer must not fail the commit's other work
        log.exception("live update not sent: no channel layer")
        return False
    if layer is None:
        return False
    # Any failure of the layer stays here: live updates must never fail ingest or evaluation.
    return layer_breaker(layer).call(lambda: _deliver(layer, list(messages.values())) or True,
                                     errors=(Exception,), fallback=False)


def _prefetch(frames):
    """Frames that read the database at commit may say what they all need (a `prefetch` classmethod, given
    every frame of its kind in this send): a storm's hundred incident frames are then two queries, not two each.
    A prefetch that fails leaves each frame to read on its own."""
    kinds = defaultdict(list)
    for frame in frames:
        prefetch = getattr(frame, "prefetch", None)
        if prefetch is not None:
            kinds[prefetch].append(frame)
    for prefetch, members in kinds.items():
        try:
            prefetch(members)
        except Exception:  # noqa: BLE001 - the frames still build, one read each
            log.exception("live frames could not be read together")


def _deliver(layer, messages):
    from channels.layers import InMemoryChannelLayer

    if isinstance(layer, InMemoryChannelLayer):
        # Its queues are the consumers' event loop's: asgiref finds that loop (or makes one, as it did).
        return async_to_sync(_send_all)(layer, messages)
    # channels_redis keeps its Redis connections per event loop, and async_to_sync from code without one (a
    # Celery worker) makes a new loop per call: a new connection for every batch evaluated, most of a send's time.
    # One loop per process, kept running, keeps its connection.
    future = asyncio.run_coroutine_threadsafe(_send_all(layer, messages), _sending_loop())
    return future.result(SEND_TIMEOUT_SECONDS + 1)


_sender = None  # (pid, event loop) sending this process's frames
_sender_lock = threading.Lock()


def _sending_loop():
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():  # a forked worker process starts its own
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="live-updates", daemon=True).start()
            _sender = (os.getpid(), loop)
        return _sender[1]


def layer_breaker(layer) -> Breaker:
    with _breakers_lock:
        if layer not in _breakers:
            _breakers[layer] = Breaker("live update not sent: channel layer", logger=log)
        return _breakers[layer]


async def _send_all(layer, messages):
    async def send():
        for message in messages:
            await layer.group_send(run_group(message["run"]), message)
            await layer.group_send(project_group(message["project"]), message)

    await asyncio.wait_for(send(), SEND_TIMEOUT_SECONDS)


def _json_safe(value):
    # Datetimes as ISO strings; the payloads carry non-finite numbers as strings already (wire_value).
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def publish_points(run, receipt, series) -> None:
    """A batch of the run has been evaluated: its steps and the series it touched."""
    publish(run, "points", {
        "receipt": receipt.pk,
        "min_step": receipt.min_step,
        "max_step": receipt.max_step,
        "last_step": run.last_step,
        "attempt": run.attempt,
        "points": receipt.points,
        "events": receipt.events,
        "phases": receipt.phases,
        "series": [{"metric": metric, "component": component or None} for metric, component in series],
    })


def publish_status(run, status: str, previous: str | None, health=None) -> None:
    """The run's status changed (healthy, alerting, stalled, finished); `health`, a callable called at commit,
    gives the frame's `health` and `label` (alerts/health.py)."""
    frame = {"status": str(status), "previous": None if previous is None else str(previous), "last_step": run.last_step}
    publish(run, "run", (lambda: {**frame, **health()}) if health is not None else frame)
