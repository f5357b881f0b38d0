"""The stored batches one evaluation judges: one, or several of a run's waiting batches at once.

Judging costs about the same per (rule, series) whatever the number of points (a dozen numpy calls on the
batch's points of each series), so a run whose batches wait (a worker behind ingest, a Redis restart, a job
sending many small batches) is judged several batches at a time: each series' points of all of them in one
pass. The engine's verdicts do not depend on how a job cut its telemetry into batches (point-by-point
semantics, alerts/bands.py judged_band; neighbours in step order, alerts/evaluation.py _absence), so this
changes how fast a backlog clears, not what fires: one "extended" row per alert per evaluation instead of one
per batch. Each change an evaluation writes names the batch that brought its step (its latest for what no
batch brought: a silence, an event's end).
"""
from __future__ import annotations

from django.conf import settings


class Batches:
    """One run's batches, in arrival order, judged as one: their ids and their span of steps."""

    def __init__(self, receipts):
        self.receipts = list(receipts)
        if not self.receipts:
            raise ValueError("no batch to judge")
        self.latest = self.receipts[-1]  # rule faults, and changes at a step no batch brought, name it
        self.ids = [r.pk for r in self.receipts]
        spans = [(r.min_step, r.max_step) for r in self.receipts if r.min_step is not None]
        self.min_step = min(a for a, _ in spans) if spans else None
        self.max_step = max(b for _, b in spans) if spans else None
        self.by_pk = {r.pk: r for r in self.receipts}

    @classmethod
    def of(cls, receipts) -> Batches:
        if isinstance(receipts, Batches):
            return receipts
        return cls(receipts if isinstance(receipts, (list, tuple)) else [receipts])

    def __len__(self):
        return len(self.receipts)


def waiting(receipts) -> list:
    """Of a run's unevaluated batches in arrival order, those the next evaluation takes: the oldest, and the
    ones after it up to EVALUATION_BATCHES_AT_ONCE batches and EVALUATION_POINTS_AT_ONCE points (memory and
    the length of the evaluation's transaction stay bounded)."""
    taken, points = [], 0
    for receipt in receipts[:settings.EVALUATION_BATCHES_AT_ONCE]:
        if taken and points + receipt.points > settings.EVALUATION_POINTS_AT_ONCE:
            break
        taken.append(receipt)
        points += receipt.points
    return taken
