"""Ingest yields to evaluation: a project whose batches wait too long to be judged gets its answers later.

Alerts are what the console is for, and an alert is only as current as the evaluation behind it. When
senders push more than the workers judge (a machine whose web processes take its CPUs from the workers, too
few workers, a worker down), the batches still waiting grow older, and so would every alert. Then each of
that project's answers is held back, after its batch is stored and committed, by as much as the oldest
waiting batch is past EVALUATION_PACE_AFTER_MS, at most EVALUATION_PACE_MAX_MS: a sender that waits for
its answers (the client does) slows to what evaluation keeps up with, and the lag stays near the bound
instead of growing. Nothing is refused and nothing is lost: a batch is stored before its answer waits.

Only a project running ahead is paced: judged by its own oldest waiting batch, and only while it has more
than one batch waiting. A project whose one batch waits behind another project's flood is not running
ahead of evaluation, and keeps its answers; the flood's project is held.
Past PACE_GIVE_UP_SECONDS evaluation is not behind but stopped (no worker running, a batch that keeps
failing): holding answers would not bring it back and would only slow the senders, so they are not held;
the backlog shows in /metrics instead (warninglight_evaluation_oldest_unevaluated_seconds).
The wait is spent on the event loop (opsconsole/handler.py), holding no thread and no database connection.
Each web process asks the database at most every PACE_CHECK_SECONDS a project: one indexed query.
"""
from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from ingest.models import BatchReceipt

log = logging.getLogger(__name__)

PACE_CHECK_SECONDS = 0.25
PACE_GIVE_UP_SECONDS = 30.0

_checked: dict[int, tuple[float, float | None]] = {}  # project id -> (monotonic time asked, oldest waiting as Unix time)
_lock = threading.Lock()


def _oldest_waiting(project_id: int) -> float | None:
    """When the project's oldest batch not yet judged was received (Unix seconds), or None when it has fewer
    than two waiting."""
    now = time.monotonic()
    with _lock:
        known = _checked.get(project_id)
    if known is not None and now - known[0] < PACE_CHECK_SECONDS:
        return known[1]
    try:
        waiting = list(BatchReceipt.objects.filter(run__project_id=project_id, evaluated_at__isnull=True)
                       .order_by("received_at").values_list("received_at", flat=True)[:2])
    except DatabaseError:
        # Asked after the batch is committed: a database gone meanwhile must not turn its 202 into an error.
        log.warning("ingest pacing: the evaluation backlog could not be read; the answer is not held", exc_info=True)
        return None
    found = waiting[0].timestamp() if len(waiting) == 2 else None
    with _lock:
        if len(_checked) > 10_000:  # projects come and go; a process keeps a bounded memory of them
            _checked.clear()
        _checked[project_id] = (now, found)
    return found


def evaluation_pace(project_id: int) -> float:
    """Seconds to hold this project's ingest answer: 0 while evaluation keeps up (or pacing is off)."""
    after = settings.EVALUATION_PACE_AFTER_MS / 1000
    if after <= 0:
        return 0.0
    oldest = _oldest_waiting(project_id)
    if oldest is None:
        return 0.0
    waited = timezone.now().timestamp() - oldest
    if not after < waited <= PACE_GIVE_UP_SECONDS:
        return 0.0
    return min(settings.EVALUATION_PACE_MAX_MS / 1000, waited - after)


def forget():
    """Drop what this process knows of the projects' backlogs (tests; a process that must ask afresh)."""
    with _lock:
        _checked.clear()
