#!/usr/bin/env python
"""What one evaluation costs a worker, by how many batches it judges at once, on the alert-latency workload.

    DATABASE_URL=postgres://… .venv/bin/python benchmarks/evaluation_cost.py                   # 1, 10 and 50 at once
    DATABASE_URL=postgres://… .venv/bin/python benchmarks/evaluation_cost.py --at-once 10 --repeat 3

The workload is benchmarks/latency.py's (4 runs × 54 series, 100-step batches of 5,400 points, a NaN loss every
third batch: an alert and an incident each), 4,000 steps a run (864,000 points; --steps). For each --at-once N
it builds a fresh database (migrated, the starter pack through `issue_token --owner`), stores every batch
through the ingest service in this process (evaluation left for later, batches of the runs interleaved as they
arrive), then judges them as a worker does (alerts.tasks._evaluate_oldest, run by run, N batches of a run at
a time: EVALUATION_BATCHES_AT_ONCE) and prints this process's CPU time a point, the PostgreSQL backend's,
the evaluations, the queries an evaluation and a digest of every alert change (the same for every N).

A worker that keeps up judges each batch alone (N = 1); a worker behind judges the waiting ones together: the
difference between the rows is the fixed cost of an evaluation, which sets how far behind a worker must fall
before it keeps up (docs/benchmarks.md, the alert latency section).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root first: benchmarks/ingest.py would shadow the `ingest` app

from benchmarks import evaluation as ev  # noqa: E402
from benchmarks import ingest as bench  # noqa: E402
from benchmarks import latency  # noqa: E402

OWNER = "Bench On-call <oncall@example.org>"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL"), help="PostgreSQL server (default $DATABASE_URL)")
    p.add_argument("--db", default=None, help="database to drop and recreate (default: DATABASE_URL's name + _evalcost)")
    p.add_argument("--steps", type=int, default=4_000, help="steps a run (default 4,000; at least 2,000)")
    p.add_argument("--at-once", default="1,10,50", help="batches of a run judged at once, comma-separated (default 1,10,50)")
    p.add_argument("--repeat", type=int, default=1, help="times each --at-once is measured (default 1)")
    return p.parse_args(argv)


def measure(args, db_url, admin_url, db, at_once, bodies):
    """One fresh database, every batch stored, then judged `at_once` at a time in a child process (the setting
    is read at start): its printed figures."""
    bench.recreate_database(admin_url, db)
    env = bench.service_env(db_url, "")
    env.pop("REDIS_URL")
    env["WL_VAR_DIR"] = tempfile.mkdtemp(prefix="wl-evalcost-var-")
    env["EVALUATION_BATCHES_AT_ONCE"] = str(at_once)
    env["EVALUATION_POINTS_AT_ONCE"] = str(at_once * 5_400)
    ev.manage(env, "migrate", "--noinput")
    ev.manage(env, "issue_token", "evalcost", "--owner", OWNER)
    import subprocess

    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.evaluation_cost import child; child({bodies!r})"
    res = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"the measuring process failed:\n{res.stdout}\n{res.stderr}")
    return res.stdout.strip()


def child(bodies_file):
    """In a fresh process with the database and EVALUATION_BATCHES_AT_ONCE set: store, judge (evaluation.py's
    evaluate_receipts, in arrival order as a worker takes them), print."""
    import pickle

    bodies, points = pickle.loads(Path(bodies_file).read_bytes())
    ev.setup_django({k: os.environ[k] for k in ("DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL")})
    from alerts.models import AlertChange
    from ingest.models import BatchReceipt, Project

    ev.store(Project.objects.get(slug="evalcost"), bodies)
    receipts = list(BatchReceipt.objects.order_by("id").values_list("pk", "run_id"))
    wall, cpu, per_evaluation, queries, server = ev.evaluate_receipts(receipts)
    rows = list(AlertChange.objects.order_by("alert__run__run_id", "alert__rule__name", "alert__component", "step", "kind")
                .values_list("alert__run__run_id", "alert__rule__name", "alert__component", "kind", "step"))
    digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
    print(f"{len(per_evaluation)}\t{cpu:.3f}\t{server:.3f}\t{wall:.3f}\t{sum(queries)}\t{len(rows)}\t{digest}\t{points}")


def main(argv=None):
    args = parse_args(argv)
    if not args.database_url or not args.database_url.startswith("postgres"):
        raise SystemExit("set DATABASE_URL (or --database-url) to a PostgreSQL URL: postgres://user@host:port/name")
    url = urlparse(args.database_url)
    db = args.db or f"{url.path.lstrip('/') or 'wl'}_evalcost"
    admin_url = bench.db_url(args.database_url, "postgres")
    db_url = bench.db_url(args.database_url, db)
    runs = latency.make_runs(argparse.Namespace(runs=4, series=54, steps=max(2_000, args.steps)))
    n_batches = len(next(iter(runs.values()))[0])
    bodies = [run_bodies[b] for b in range(n_batches) for run_bodies, _ in runs.values()]  # interleaved, as sent
    points = 4 * 54 * max(2_000, args.steps)
    import pickle

    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as fh:
        pickle.dump((bodies, points), fh)
    print(f"Warning Light evaluation cost: {bench.code_version()}\n  machine: {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {bench.pg_settings(admin_url)}\n  workload: benchmarks/latency.py's, "
          f"4 runs x 54 series x {max(2_000, args.steps):,} steps = {points:,} points in {len(bodies)} batches of 5,400, "
          f"a NaN loss every third batch\n")
    print("| batches at once | evaluations | CPU µs a point | PostgreSQL µs a point | ms CPU an evaluation | "
          "queries an evaluation | alert changes | digest |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    try:
        for at_once in [int(x) for x in args.at_once.split(",")]:
            for _ in range(args.repeat):
                out = measure(args, db_url, admin_url, db, at_once, fh.name)
                evaluations, cpu, server, _wall, queries, changes, digest, n = out.splitlines()[-1].split("\t")
                evaluations, cpu, server, n = int(evaluations), float(cpu), float(server), int(n)
                print(f"| {at_once} | {evaluations} | {cpu / n * 1e6:.2f} | {server / n * 1e6:.2f} | "
                      f"{cpu / evaluations * 1000:.1f} | {int(queries) / evaluations:.0f} | {changes} | {digest} |", flush=True)
    finally:
        os.unlink(fh.name)
        print(f"\n  load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
