#!/usr/bin/env python
"""Scale-out of evaluation: the same stored backlog of several runs drained by 1, then by 2 worker processes.

    .venv/bin/python benchmarks/scaleout.py --quick     # 4 runs x 54 series x 1,200 steps (259,200 points), ~2 min
    .venv/bin/python benchmarks/scaleout.py             # 4 runs x 54 series x 3,000 steps (648,000 points)
    .venv/bin/python benchmarks/scaleout.py --processes 1,2,4

For each process count:

1. a fresh PostgreSQL database (--db, dropped and recreated; Redis --redis-url flushed), migrated, a
   project made by `issue_token --owner` (the starter rule pack judges every batch);
2. RUNS runs of the ingest benchmark's data (benchmarks/ingest.py RunData, a seed per run), 100-step
   batches interleaved across the runs, posted by one client to `uvicorn --workers 2` with no Celery worker
   running: every batch is stored, its evaluation deferred. Then Redis is flushed (the queued messages go);
3. `celery -A opsconsole worker -c N` is started and waited for, and one task per batch is queued in the
   order the batches arrived (`manage.py shell`, alerts.tasks.queue_evaluation), as ingest would have;
4. the time from the first task queued to the last batch's evaluated_at is the drain time.

Prints one row per drain, in the order run (`--processes 1,2,1,2` repeats each count: every run is shown, none
hides another): points evaluated per second, the speed-up over the median of the runs with the fewest processes,
and the machine's load average (1 minute) before and after that drain. On a shared machine the load says which
figures to trust: a drain that shared the cores with another job reads slow.
Each run's batches are evaluated in arrival order whatever N (alerts/tasks.py); only different runs go
in parallel, so the speed-up is bounded by the number of runs as well as by the cores.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root first: benchmarks/ingest.py would shadow the `ingest` app

from benchmarks import ingest as bench  # noqa: E402
from benchmarks.deployment import Console, deployment_arguments, machine, run_body  # noqa: E402

QUEUE_ALL = (
    "import time\n"
    "from alerts.tasks import queue_evaluation\n"
    "from ingest.models import BatchReceipt\n"
    "ids = list(BatchReceipt.objects.filter(evaluated_at__isnull=True).order_by('pk').values_list('pk', flat=True))\n"
    "t = time.time()\n"
    "assert all(queue_evaluation(pk) for pk in ids)\n"
    "print(len(ids), t)\n"
)


def load() -> float:
    return os.getloadavg()[0]


def drain(args, bodies, processes: int, logdir: Path):
    """(points/s evaluated, load average before the drain, after it)."""
    console = Console(args.admin_url, args.db, args.redis_url, logdir)
    try:
        console.start_web(2)
        npoints = [args.series * bench.STEPS_PER_BATCH] * len(bodies)
        elapsed, stats = bench.send_all(console.port, console.token, bodies, npoints, 1, f"store, -c {processes}")
        if stats.failures:
            raise RuntimeError(f"ingest failures: {stats.failures[:3]}")
        bench.flush_redis(args.redis_url)  # the messages ingest queued: queued again below, once the workers are up
        console.start_workers(processes)
        before = load()
        queued, started = bench.manage(console.env, "shell", "-c", QUEUE_ALL).split()[-2:]
        console.wait_evaluated(args.timeout)
        with console.connect() as conn:
            last = conn.execute("SELECT extract(epoch FROM max(evaluated_at))::float FROM ingest_batchreceipt").fetchone()[0]
        after = load()
    finally:
        console.stop()
    seconds = last - float(started)
    points = stats.points_accepted
    print(f"  -c {processes}: stored {points:,} points in {elapsed:.1f}s; {queued} batches evaluated in {seconds:.1f}s "
          f"= {points / seconds:,.0f} points/s evaluated; load {before:.2f} -> {after:.2f}", flush=True)
    return points / seconds, before, after


def main(argv=None):
    p = deployment_arguments(__doc__.split("\n")[1], "wl_bench_scaleout", steps=3000, quick_steps=1200)
    p.add_argument("--processes", default="1,2", help="worker process counts to compare (default 1,2)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for one drain")
    args = p.parse_args(argv)
    if args.quick:
        args.steps = 1200
    counts = [int(c) for c in args.processes.split(",")]

    runs = [(f"scaleout-{r}", bench.RunData(args.series, args.steps, seed=7 + r)) for r in range(args.runs)]
    n_batches = runs[0][1].n_batches
    bodies = [run_body(data, run_id, b) for b in range(n_batches) for run_id, data in runs]
    print(f"Warning Light evaluation scale-out: {args.runs} runs x {args.series} series x {args.steps:,} steps = "
          f"{args.runs * args.series * args.steps:,} points in {len(bodies)} batches of {args.series * bench.STEPS_PER_BATCH:,}, "
          f"starter pack; worker processes {counts}; PostgreSQL and Redis on this host; {bench.code_version()}\n"
          f"  {machine()}", flush=True)
    results = []  # one per drain, in order: a count given twice is run, and shown, twice
    with tempfile.TemporaryDirectory(prefix="wl-scaleout-") as tmp:
        for n in counts:
            results.append((n, *drain(args, bodies, n, Path(tmp))))
    fewest = min(counts)
    base = statistics.median(rate for n, rate, _, _ in results if n == fewest)
    print(f"\n| drain | worker processes | points/s evaluated | speed-up (over the median at {fewest}) "
          "| load average before | after |\n| ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, (n, rate, before, after) in enumerate(results, 1):
        print(f"| {i} | {n} | {rate:,.0f} | {rate / base:.2f}x | {before:.2f} | {after:.2f} |")
    print(f"\n{args.runs} runs x {args.series} series x {args.steps:,} steps; {machine()}")


if __name__ == "__main__":
    main()
