#!/usr/bin/env python
"""Ingest time another run loses while a 1 M-point run is deleted.

    .venv/bin/python benchmarks/delete_run.py                 # delete by `manage.py delete_run --yes`
    .venv/bin/python benchmarks/delete_run.py --via api       # delete by DELETE /api/v1/runs/<id>/ on the same server

What it does:

1. a fresh PostgreSQL database (--db, dropped and recreated; Redis --redis-url is flushed), migrated, a
   project and a superuser with an API token; one uvicorn process (DEBUG=0); with --via api one Celery
   worker on the `backtests` queue, where the API queues the delete (no worker evaluates: batches queue
   their evaluation, which never runs, so the benchmark measures storage, not evaluation);
2. ingests the victim: a 1 M-point run (benchmarks/ingest.py RunData, 70 series x 14,286 steps, cut into
   5,000-point batches), as fast as two clients go;
3. a steady sender posts another run's 1,000-point batches, one every --interval s, over one keep-alive
   connection, timing each answer; after --before s it deletes the victim (retention.purge.delete_run in
   a separate process, as `manage.py delete_run --yes` does; or DELETE on the same server, which queues
   it, timed until the run's row is gone), and keeps sending --after s more;
4. compares the steady sender's per-batch latency during the delete with before it. The ingest time
   lost is the sum, over the batches that overlapped the delete, of their latency above the median before.

Prints the latencies (p50/p95/max) before and during, the delete's own time and chunks, and MET/MISSED
against the target: at most 1 s of the other run's ingest time lost.
"""
from __future__ import annotations

import argparse
import http.client
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root first: benchmarks/ingest.py would shadow the `ingest` app

import orjson  # noqa: E402
import psycopg  # noqa: E402

from benchmarks import ingest as bench  # noqa: E402
from benchmarks.support import PYTHON, Server  # noqa: E402

TARGET_LOST_S = 1.0
VICTIM = "bench-victim-1m"
STEADY = "bench-steady"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--db", default="wl_bench_delete")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/7")
    parser.add_argument("--via", choices=["command", "api"], default="command")
    parser.add_argument("--points", type=int, default=1_000_000, help="points of the run deleted")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between the steady sender's batches")
    parser.add_argument("--before", type=float, default=6.0)
    parser.add_argument("--after", type=float, default=4.0)
    return parser.parse_args()


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def describe(label, values):
    ms = [v * 1000 for v in values]
    return f"{label:<28} {len(ms):>4} batches  p50 {percentile(ms, .5):7.1f} ms  p95 {percentile(ms, .95):7.1f} ms  max {max(ms, default=float('nan')):7.1f} ms"


class SteadySender(threading.Thread):
    """Posts the steady run's batches one every `interval` s (a late batch goes at once) and records (start, end, status)."""

    def __init__(self, port, token, bodies, interval):
        super().__init__(daemon=True)
        self.port, self.token, self.bodies, self.interval = port, token, bodies, interval
        self.samples: list[tuple[float, float, int]] = []
        self.stop = threading.Event()

    def run(self):
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        due = time.perf_counter()
        for body in self.bodies:
            if self.stop.is_set():
                break
            time.sleep(max(0.0, due - time.perf_counter()))
            start = time.perf_counter()
            conn.request("POST", "/api/v1/ingest", body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            self.samples.append((start, time.perf_counter(), resp.status))
            due += self.interval
        conn.close()


def main():
    args = parse_args()
    url = bench.db_url(args.admin_url, args.db)
    bench.recreate_database(args.admin_url, args.db)
    bench.flush_redis(args.redis_url)
    env = bench.service_env(url, args.redis_url)
    bench.manage(env, "migrate", "--noinput")
    token = bench.manage(env, "issue_token", "bench").strip()
    subprocess.run([PYTHON, "manage.py", "createsuperuser", "--noinput", "--username", "bench-admin", "--email", "b@example.com"],
                   cwd=ROOT, env={**env, "DJANGO_SUPERUSER_PASSWORD": "bench-admin-pw"}, check=True, capture_output=True)
    user_token = bench.manage(env, "api_token", "bench-admin").strip()

    n_series = 70
    victim = bench.RunData(n_series, -(-args.points // n_series), seed=3)
    victim_bodies, victim_counts = victim.point_batches(5_000, run_id=VICTIM)
    steady_steps = int((args.before + args.after + 60) / args.interval * 1_000 / n_series) + 1
    steady = bench.RunData(n_series, steady_steps, seed=5)
    steady_bodies, _ = steady.point_batches(1_000, run_id=STEADY)
    print(f"{bench.pg_settings(args.admin_url)}; {bench.code_version()}", flush=True)

    logdir = Path(tempfile.mkdtemp(prefix="wl-delete-run-"))
    server = Server(env, logdir / "uvicorn.log")
    try:
        server.wait_ready()
        if args.via == "api":
            server.procs.start("celery", [PYTHON, "-m", "celery", "-A", "opsconsole", "worker", "-Q", "backtests", "-c", "1",
                                          "--loglevel", "WARNING"], env)
        elapsed, stats = bench.send_all(server.port, token, victim_bodies, victim_counts, 2, "victim")
        if stats.failures:
            raise SystemExit(f"victim ingest failed: {stats.failures[:3]}")
        print(f"victim: {stats.points_accepted:,} points in {len(victim_bodies)} batches, {elapsed:.1f} s", flush=True)
        print(f"victim tables: {bench.stored_counts(url)}", flush=True)

        sender = SteadySender(server.port, token, steady_bodies, args.interval)
        sender.start()
        time.sleep(args.before)
        t0 = time.perf_counter()
        if args.via == "command":
            done = subprocess.run([PYTHON, "-c", DELETE_SNIPPET, VICTIM], cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(done.stderr)
            report = orjson.loads(done.stdout.strip().splitlines()[-1])
            # perf_counter is CLOCK_MONOTONIC on Linux: one clock for both processes.
            t_start, t_end = report["started"], report["started"] + report["seconds"]
            delete_words = f"delete_run (own process): {report['seconds']:.2f} s; {report['outcome']}"
        else:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
            conn.request("DELETE", f"/api/v1/runs/{VICTIM}/", headers={"Authorization": f"Bearer {user_token}"})
            resp = conn.getresponse()
            body = resp.read()
            answered = time.perf_counter()
            # The worker deletes it: done when the run's row is gone.
            with psycopg.connect(url, autocommit=True) as db:
                while db.execute("SELECT 1 FROM ingest_run WHERE run_id = %s", [VICTIM]).fetchone():
                    time.sleep(0.02)
            t_start, t_end = t0, time.perf_counter()
            delete_words = (f"DELETE /api/v1/runs/{VICTIM}/ -> {resp.status} in {answered - t0:.3f} s ({body[:100].decode()}); "
                            f"run gone after {t_end - t0:.2f} s (a Celery worker, -Q backtests -c 1)")
        time.sleep(args.after)
        sender.stop.set()
        sender.join()
        server.check_alive()
    finally:
        server.stop()

    bad = [s for s in sender.samples if s[2] != 202]
    before = [end - start for start, end, _ in sender.samples if end < t_start]
    during = [end - start for start, end, _ in sender.samples if start < t_end and end > t_start]
    after = [end - start for start, end, _ in sender.samples if start >= t_end]
    baseline = statistics.median(before)
    lost = sum(max(0.0, latency - baseline) for latency in during)
    print(delete_words)
    print(describe("steady sender, before", before))
    print(describe("steady sender, during delete", during))
    print(describe("steady sender, after", after))
    print(f"non-202 answers: {len(bad)}")
    verdict = "MET" if lost <= TARGET_LOST_S and not bad else "MISSED"
    print(f"ingest time lost by the other run: {lost:.3f} s (target <= {TARGET_LOST_S:.0f} s): {verdict}")


# Runs in its own process, as `manage.py delete_run` does; prints when the delete began (after Django's start)
# and how long it took.
DELETE_SNIPPET = """
import os, sys, time, json
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
import django
django.setup()
from ingest.models import Run
from retention.purge import delete_run
run = Run.objects.get(run_id=sys.argv[1])
started = time.perf_counter()
outcome = delete_run(run)
seconds = time.perf_counter() - started
print(json.dumps({"started": started, "seconds": seconds, "outcome": outcome.as_dict()}))
"""


if __name__ == "__main__":
    main()
