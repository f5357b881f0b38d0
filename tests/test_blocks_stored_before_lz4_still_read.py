"""Stored blocks moved from zlib to byte-shuffled LZ4. A deployment upgraded in place holds both: blocks written
before must read as they were written, beside new ones, to the bit (NaN, ±inf, -0.0, times)."""
import math
import struct
import zlib

import numpy as np
import pytest

from ingest.models import Block, Series
from ingest.storage import pack, read_points, unpack

pytestmark = pytest.mark.django_db


def zlib_block(steps, values, times):
    """A block as releases before the LZ4 layout wrote it (ingest/storage.py at git 25b123a)."""
    def deltas(a):
        return np.concatenate([a[:1], np.diff(a)]).astype("<i8").tobytes()

    parts = [struct.pack("<BI", 0 if times is None else 1, len(steps)), deltas(steps), values.astype("<f8").tobytes()]
    if times is not None:
        parts.append(deltas(np.round(times * 1e6).astype(np.int64)))
    return zlib.compress(b"".join(parts), 1)


def awkward_points(n=300):
    steps = np.arange(1000, 1000 + 3 * n, 3, dtype=np.int64)
    values = 2.5 + np.random.default_rng(7).standard_normal(n) / 20
    values[[4, 5, 6, 7]] = [math.nan, math.inf, -math.inf, -0.0]
    times = 1.7e9 + np.arange(n) * 0.25
    return steps, values, times


@pytest.mark.parametrize("with_times", [True, False])
def test_an_old_block_and_a_new_one_unpack_to_the_same_points(with_times):
    steps, values, times = awkward_points()
    times = times if with_times else None
    old, new = unpack(zlib_block(steps, values, times)), unpack(pack(steps, values, times))
    for got in (old, new):
        assert got[0].tolist() == steps.tolist()
        assert got[1].tobytes() == values.tobytes()  # NaN, infinities and the sign of -0.0 to the bit
        assert (got[2] is None) if times is None else np.allclose(got[2], times, rtol=0, atol=1e-6)


def test_the_new_layout_is_smaller_than_zlib_on_noisy_metrics():
    steps, values, times = awkward_points()
    assert len(pack(steps, values, times)) < len(zlib_block(steps, values, times))


def test_a_series_with_old_and_new_blocks_reads_whole(sender):
    def batch(first):
        return {"run": {"id": "upgraded"}, "points": [
            {"step": s, "metric": "loss", "value": 3.0 - s / 100, "time": 1.7e9 + s} for s in range(first, first + 50)]}

    assert sender.post(batch(0)).status_code == 202
    series = Series.objects.get(run__run_id="upgraded", metric="loss")
    for block in Block.objects.filter(series=series):  # the first batch as the old release stored it
        steps, values, times = unpack(block.data)
        block.data = zlib_block(steps, values, times)
        block.save(update_fields=["data"])
    assert sender.post(batch(50)).status_code == 202

    steps, values, _ = read_points(series)
    assert steps.tolist() == list(range(100))
    assert values.tolist() == [3.0 - s / 100 for s in range(100)]
    assert {bytes(b.data)[:1] == b"\x01" for b in Block.objects.filter(series=series)} == {True, False}
