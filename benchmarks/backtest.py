#!/usr/bin/env python
"""Backtest benchmark: one band rule on one metric replayed over the 10 M-point run of benchmarks/console.py.

    .venv/bin/python benchmarks/backtest.py                     # build (or --reuse) the run, then time the backtest
    .venv/bin/python benchmarks/backtest.py --reuse             # keep the database if it holds that run already
    .venv/bin/python benchmarks/backtest.py --steps 20000 --series 26   # quick check (520,000 points)

The run is console.py's (50 series x 200,000 steps, seed 7, 100-step batches = 2,000 batches), built the
same way by console.py's own `build` (through uvicorn and a Celery worker; no rules on the project) in the
database `wl_bench_backtest` (so it never drops console.py's). Then, in this process (Django on that
database), a draft band rule on `loss` (the starter pack's loss-spike settings) is backtested over the run
with alerts.backtest.backtest: every stored batch replayed in arrival order through the live evaluator,
nothing written. Timed --repeats times after one warm-up; prints the median and the worst, the points
judged, the would-be alerts, and checks that no row was written. Target: ≤ 10 s.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/, where ingest.py would shadow the `ingest` app.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import console  # noqa: E402
from benchmarks import ingest as bench  # noqa: E402

TARGET_S = 10.0
RULE = {
    "name": "loss-spike-draft", "kind": "band", "description": "", "owner": "Bench On-call <oncall@example.org>",
    "scope": {"metrics": ["loss"], "component": ""}, "persistence": {"points": 3, "resolve_points": 10},
    "diagnostic_url": "https://runbooks.example/loss", "permitted_response": "notify",
    "params": {"direction": "above", "width": 6.0},
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200_000)
    p.add_argument("--series", type=int, default=50)
    p.add_argument("--reuse", action="store_true", help="keep the database if it already holds exactly this run")
    p.add_argument("--db", default="wl_bench_backtest")
    p.add_argument("--admin-url", default=os.environ.get("BENCH_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/15", help="flushed before the build")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--drain-timeout", type=float, default=3600.0)
    p.add_argument("--drain-stall", type=float, default=120.0)
    return p.parse_args(argv)


def ensure_run(args, data, url, env):
    have = console.stored_run(args.admin_url, args.db)
    want = {"series": data.n_series, "points": data.n_points, "max_step": data.n_steps - 1}
    if args.reuse and have and all(have[k] == v for k, v in want.items()) and have["unevaluated"] == 0:
        print(f"== reusing {args.db}: {have['points']:,} points in {have['series']} series ==", flush=True)
        return
    build_args = argparse.Namespace(pack=False, db=args.db, admin_url=args.admin_url, redis_url=args.redis_url,
                                    drain_timeout=args.drain_timeout, drain_stall=args.drain_stall)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wl-backtest-bench-") as logdir:
        console.build(build_args, data, env, url, Path(logdir))
    print(f"  built in {time.perf_counter() - t:.0f}s (not timed as a target)", flush=True)


def measure(args, url, env):
    for key in ("DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL"):
        os.environ[key] = env[key]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    import django

    django.setup()
    from alerts.backtest import backtest
    from alerts.models import Alert, AlertChange, BandSample, Rule, RuleProgress
    from ingest.models import BatchReceipt, Block, Project, Run

    def rows():
        return [m.objects.count() for m in (Alert, AlertChange, RuleProgress, BandSample, Rule)]

    project = Project.objects.get(slug=bench.PROJECT_SLUG)
    run = Run.objects.get(run_id=bench.RUN_ID)
    rule = Rule(project=project, **RULE)
    rule.full_clean(validate_unique=False, validate_constraints=False)
    batches = BatchReceipt.objects.filter(run=run).count()
    judged = sum(b.count for b in Block.objects.filter(series__run=run, series__metric="loss", series__component="").only("count"))
    points = sum(b.count for b in Block.objects.filter(series__run=run).only("count"))
    before = rows()
    print(f"\n== backtest: draft band rule on loss over run {run.run_id} ({points:,} points, {batches} batches; "
          f"{judged:,} loss points judged); 1 warm-up + {args.repeats} timed ==", flush=True)
    backtest(rule, [run])
    times, result = [], None
    for _ in range(args.repeats):
        t = time.perf_counter()
        result = backtest(rule, [run])
        times.append(time.perf_counter() - t)
    assert rows() == before, "a backtest wrote rows"
    median, worst = statistics.median(times), max(times)
    print(f"  backtest time: median {median:.2f} s, worst {worst:.2f} s  (target ≤ {TARGET_S:.0f} s: "
          f"{'met' if median <= TARGET_S else 'MISSED'})")
    print(f"  would fire {result['alerts']} alert(s): " + ", ".join(
        f"{a['component'] or '-'}/{a['metric']} first {a['first_step']} fired {a['fired_step']}" for a in result["would_fire"][:10]))
    print(f"  rows before/after (Alert, AlertChange, RuleProgress, BandSample, Rule): {before} / {rows()}")
    return median


def main(argv=None):
    args = parse_args(argv)
    lock = bench.exclusive(args.admin_url, args.db, args.redis_url)  # noqa: F841  (one benchmark at a time: builds drop databases, flush Redis)
    data = bench.RunData(args.series, args.steps)
    url = bench.db_url(args.admin_url, args.db)
    env = bench.service_env(url, args.redis_url)
    print(f"Warning Light backtest benchmark: {data.n_series} series x {data.n_steps:,} steps = {data.n_points:,} points; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {bench.code_version()}", flush=True)
    ensure_run(args, data, url, env)
    median = measure(args, url, env)
    return 0 if median <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
