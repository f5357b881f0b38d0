"""Stored blocks: the current layout (byte-shuffled LZ4, ingest/storage.py) against the zlib layout of releases
before it, on the real training logs in data/real-runs: bytes a point, and the CPU to write and to read a block.

    .venv/bin/python benchmarks/block_codec.py                  # blocks of 93 points (a 5,000-point batch of 54 series)
    .venv/bin/python benchmarks/block_codec.py --points 500

The real logs carry no per-point times, so their blocks hold steps and values only, as the console stores
such points. Needs no database.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import struct
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")


def zlib_block(steps, values):
    """A block as releases before the LZ4 layout wrote it (zlib level 1 over header, step deltas, values)."""
    deltas = np.concatenate([steps[:1], np.diff(steps)]).astype("<i8").tobytes()
    return zlib.compress(struct.pack("<BI", 0, len(steps)) + deltas + values.astype("<f8").tobytes(), 1)


def real_series():
    """{(run, metric, component): (steps, values)} from every log in data/real-runs."""
    points = defaultdict(list)
    for path in sorted((ROOT / "data" / "real-runs").glob("*.ndjson.gz")):
        with gzip.open(path, "rt") as lines:
            for line in lines:
                item = json.loads(line)
                if item.get("type") == "point" and isinstance(item.get("value"), (int, float)):
                    points[(item["run"], item["metric"], item.get("component", ""))].append((item["step"], item["value"]))
    out = {}
    for key, rows in points.items():
        rows.sort()
        out[key] = (np.array([s for s, _ in rows], dtype=np.int64), np.array([v for _, v in rows], dtype=np.float64))
    return out


def timed(fn, items, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for item in items:
            fn(item)
        best = min(best, time.process_time() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=93, help="points a block (default 93)")
    parser.add_argument("--repeat", type=int, default=5, help="timing passes; the fastest is printed")
    args = parser.parse_args()
    import django

    django.setup()
    from ingest.storage import pack, unpack

    series = real_series()
    blocks = [(s[i:i + args.points], v[i:i + args.points]) for s, v in series.values()
              for i in range(0, len(s), args.points)]
    points = sum(len(s) for s, _ in blocks)
    new = [pack(s, v, None) for s, v in blocks]
    old = [zlib_block(s, v) for s, v in blocks]
    for (s, v), a, b in zip(blocks, new, old):  # both layouts must read back the same points
        for data in (a, b):
            got = unpack(data)
            assert np.array_equal(got[0], s) and got[1].tobytes() == v.tobytes()
    print(f"block codec: {len(series)} real series ({points:,} points) from data/real-runs in {len(blocks):,} blocks "
          f"of up to {args.points} points; CPU time, the fastest of {args.repeat} passes")
    print("| layout | bytes a point | write µs a block | read µs a block |")
    print("| --- | ---: | ---: | ---: |")
    for name, stored, write in (("zlib level 1 (before)", old, lambda b: zlib_block(*b)),
                                ("byte-shuffled LZ4 (now)", new, lambda b: pack(b[0], b[1], None))):
        size = sum(map(len, stored)) / points
        written = timed(write, blocks, args.repeat) / len(blocks) * 1e6
        read = timed(unpack, stored, args.repeat) / len(blocks) * 1e6
        print(f"| {name} | {size:.2f} | {written:.1f} | {read:.1f} |")


if __name__ == "__main__":
    main()
