"""A batch whose steps are all new is stored a column at a time (BlockWriter.add_fresh_columns); one that may
re-send a step, point by point (the careful path). Both ways must store the same blocks and rollups, to the bit:
non-finite values, integers, points with and without a time, blocks across a rollup bucket's edge."""
import math

import numpy as np
import pytest

from ingest.models import Block, Rollup, Series
from ingest.storage import unpack

pytestmark = pytest.mark.django_db


def points():
    out = []
    for step in range(120, 260):  # 140 steps: across the bucket edges at 128 and 256
        out.append({"step": step, "metric": "loss", "value": "NaN" if step == 200 else 2.5 - step / 1000, "time": 1.7e9 + step / 3})
        out.append({"step": step, "metric": "grad_norm", "component": "layers.0", "value": "Infinity" if step == 130 else step})
        timed = {"time": 1.7e9 + step} if step % 3 else {}  # some points with a time, some without
        out.append({"step": step, "metric": "lr", "value": -0.0 if step == 121 else 3e-4 * step, **timed})
    out.append({"step": 5, "metric": "only_nan", "value": "-Infinity"})
    return out


def stored(run_id):
    series = {s.pk: (s.metric, s.component) for s in Series.objects.filter(run__run_id=run_id)}
    blocks = {}
    for block in Block.objects.filter(series_id__in=series).select_related("receipt"):
        steps, values, times = unpack(block.data)
        if times is not None:  # a point sent without a time has its batch's time of receipt
            received = block.receipt.received_at.timestamp()
            times = np.where(np.abs(times - received) < 1e-6, -1.0, times)
        blocks[series[block.series_id]] = (block.attempt, block.first_step, block.last_step, block.count, block.nonfinite_count,
                                           block.min_value, block.max_value, steps.tolist(), values.tobytes(),
                                           None if times is None else times.tolist())
    rollups = {(series[r.series_id], r.bucket): (r.count, r.nonfinite_count, r.min_value, r.max_value, r.last_step,
                                                 r.last_value) for r in Rollup.objects.filter(series_id__in=series)}
    return blocks, rollups


def test_a_batch_is_stored_the_same_either_way(sender):
    sender.post({"run": {"id": "by-columns"}, "points": points()})
    # A restart phase takes the careful path; in a run that holds nothing yet it starts no new attempt.
    sender.post({"run": {"id": "point-by-point"}, "points": points(), "phases": [{"step": 120, "phase": "restart"}]})

    by_columns, by_points = stored("by-columns"), stored("point-by-point")
    assert by_columns == by_points
    blocks, rollups = by_columns
    assert blocks[("lr", "")][9][:2] == [-1.0, 1.7e9 + 121]  # step 120 sent no time, 121 did
    assert blocks[("only_nan", "")][9] is None and blocks[("only_nan", "")][5] is None
    assert math.copysign(1, np.frombuffer(blocks[("lr", "")][8], dtype="<f8")[1]) == -1.0  # -0.0 kept
    assert {bucket for (key, bucket) in rollups if key == ("loss", "")} == {0, 1, 2}
