"""Per-bucket rollups keep min, max, last, count and non-finite count of the newest attempt of each step,
so a downsampled chart cannot lose a one-step spike or a NaN."""
import math
import random

import numpy as np
import pytest

from ingest.models import ROLLUP_WIDTH, Rollup, Series
from ingest.storage import Summary, from_db_float, pack, read_points, unpack

pytestmark = pytest.mark.django_db


def test_pack_round_trips_every_bit():
    values = np.array([math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 2.31])
    steps = np.array([0, 1, 2, 10, 11, 1_000_000, 9_007_199_254_740_991], dtype=np.int64)
    times = np.array([1764400000.5, 1764400000.75, 1764400001.0, 1764400002.0, 1764400003.0, 1764400004.0, 1764400005.0])
    got_steps, got_values, got_times = unpack(pack(steps, values, times))
    assert got_steps.tolist() == steps.tolist()
    assert got_values.tobytes() == values.tobytes()
    assert np.allclose(got_times, times, rtol=0, atol=1e-6)


def rollups(run_id, metric="loss"):
    series = Series.objects.get(run__run_id=run_id, metric=metric)
    return series, {r.bucket: r for r in Rollup.objects.filter(series=series)}


def test_one_step_spike_and_one_nan_stay_visible_in_their_buckets(sender):
    values = [1.0] * 1000
    values[517] = 250.0
    values[700] = math.nan
    points = [{"step": s, "metric": "loss", "value": "NaN" if math.isnan(v) else v} for s, v in enumerate(values)]
    for chunk in range(0, 1000, 100):  # many small batches, as a job sends
        sender.post({"run": {"id": "spiky"}, "points": points[chunk : chunk + 100]})
    _, rows = rollups("spiky")
    assert sum(r.count for r in rows.values()) == 1000
    assert rows[517 // ROLLUP_WIDTH].max_value == 250.0
    assert rows[700 // ROLLUP_WIDTH].nonfinite_count == 1
    assert all(r.max_value == 1.0 for b, r in rows.items() if b != 517 // ROLLUP_WIDTH)


def test_rollups_follow_the_newest_attempt_after_a_rewind(sender):
    sender.post({"run": {"id": "rw"}, "points": [{"step": s, "metric": "loss", "value": "NaN" if s == 300 else 1.0} for s in range(400)]})
    # Restart from step 250: the new attempt's values replace the old ones in the default view.
    sender.post({"run": {"id": "rw"}, "points": [{"step": s, "metric": "loss", "value": 3.0} for s in range(250, 350)]})
    series, rows = rollups("rw")
    steps, values, _ = read_points(series)
    for bucket, row in rows.items():
        mask = steps // ROLLUP_WIDTH == bucket
        expected = Summary.of(steps[mask], values[mask])
        assert (row.count, row.nonfinite_count, row.min_value, row.max_value, row.last_step) == (
            expected.count, expected.nonfinite_count, expected.min_value, expected.max_value, expected.last_step)
    assert rows[300 // ROLLUP_WIDTH].nonfinite_count == 0  # the NaN of attempt 1 was replaced


def test_random_batches_with_replays_keep_rollups_equal_to_the_points(sender):
    rng = random.Random(7)
    sent_upto = 0
    for _ in range(25):
        if sent_upto and rng.random() < 0.2:
            start = rng.randrange(max(0, sent_upto - 300), sent_upto)  # a replay
        else:
            start = sent_upto
        steps = range(start, start + rng.randrange(1, 200))
        sent_upto = max(sent_upto, steps[-1] + 1)
        choices = [rng.gauss(2, 1), "NaN", "Infinity", "-Infinity", rng.gauss(2, 1) * 100]
        points = [{"step": s, "metric": "loss", "value": rng.choices(choices, weights=[90, 2, 1, 1, 6])[0]} for s in steps]
        rng.shuffle(points)
        assert sender.post({"run": {"id": "fuzz"}, "points": points}).status_code == 202
    series, rows = rollups("fuzz")
    steps, values, _ = read_points(series)
    assert len(steps) == sent_upto
    for bucket in set((steps // ROLLUP_WIDTH).tolist()):
        mask = steps // ROLLUP_WIDTH == bucket
        expected = Summary.of(steps[mask], values[mask])
        row = rows[bucket]
        assert (row.count, row.nonfinite_count, row.min_value, row.max_value, row.last_step) == (
            expected.count, expected.nonfinite_count, expected.min_value, expected.max_value, expected.last_step)
        assert np.array([from_db_float(row.last_value)]).tobytes() == np.array([expected.last_value]).tobytes() or (
            math.isnan(expected.last_value) and row.last_value is None)


def test_a_batch_touching_more_buckets_than_one_statement_holds_is_summarised_whole(sender):
    points = [{"step": b * ROLLUP_WIDTH, "metric": "loss", "value": float(b)} for b in range(1200)]
    assert sender.post({"run": {"id": "sparse"}, "points": points}).status_code == 202
    _, rows = rollups("sparse")
    assert len(rows) == 1200 and all(rows[b].max_value == float(b) for b in range(1200))
    # and again out of order, which takes the recompute path for every bucket
    points = [{"step": b * ROLLUP_WIDTH, "metric": "loss", "value": -float(b)} for b in range(1200)]
    assert sender.post({"run": {"id": "sparse"}, "points": points}).status_code == 202
    _, rows = rollups("sparse")
    assert all(rows[b].min_value == -float(b) and rows[b].count == 1 for b in range(1200))
