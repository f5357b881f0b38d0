"""The console as deployed, for the latency and scale-out benchmarks: its own PostgreSQL database (migrated, a
project with the starter pack, a token), uvicorn, and `celery -A opsconsole worker` processes on Redis.

Reuses benchmarks/ingest.py's database, environment and run-data helpers (imported as `bench`)."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path

import orjson
import psycopg

from benchmarks import ingest as bench
from benchmarks.support import PYTHON, Procs, free_port, uvicorn_argv, wait_http

OWNER = "Bench On-call <oncall@example.org>"  # issue_token --owner: the project gets the starter pack


class Console:
    """A fresh database with the starter pack, and the processes started on it (all stopped by `stop`)."""

    def __init__(self, admin_url: str, db: str, redis_url: str, logdir: Path, pace_after_ms: int = 0):
        self.url = bench.db_url(admin_url, db)
        self.redis_url = redis_url
        self.env = bench.service_env(self.url, redis_url, pace_after_ms)
        self.procs = Procs(logdir)
        self.port = None
        bench.recreate_database(admin_url, db)
        bench.flush_redis(redis_url)
        bench.manage(self.env, "migrate", "--noinput", "-v", "0")
        self.token = bench.manage(self.env, "issue_token", bench.PROJECT_SLUG, "--owner", OWNER).strip().splitlines()[-1]
        with self.connect() as conn:
            self.rules = conn.execute("SELECT count(*) FROM alerts_rule WHERE enabled").fetchone()[0]
        if not self.rules:
            raise RuntimeError("issue_token --owner installed no rules")

    def connect(self):
        return psycopg.connect(self.url, autocommit=True)

    def start_web(self, workers: int = 1):
        self.port = free_port()
        self.procs.start("uvicorn", uvicorn_argv(self.port, workers), self.env)
        wait_http(self.port, self.procs)

    def start_workers(self, processes: int):
        """`processes` Celery worker processes (one prefork worker, -c N), waited for until they answer."""
        self.procs.start(f"celery-c{processes}", [PYTHON, "-m", "celery", "-A", "opsconsole", "worker", "-c",
                                                  str(processes), "-l", "warning", "--without-gossip",
                                                  "--without-mingle"], self.env)
        bench.wait_celery(self.env, self.procs)

    def session_cookie(self) -> str:
        """A logged-in superuser's session key, made with `manage.py shell` as a login would store it."""
        code = (
            "from importlib import import_module\n"
            "from django.conf import settings\n"
            "from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model\n"
            "u = get_user_model().objects.create_superuser('latency', 'latency@example.org', 'latency-bench-pw')\n"
            "s = import_module(settings.SESSION_ENGINE).SessionStore()\n"
            "s[SESSION_KEY] = str(u.pk); s[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]\n"
            "s[HASH_SESSION_KEY] = u.get_session_auth_hash(); s.create(); print(s.session_key)\n"
        )
        return bench.manage(self.env, "shell", "-c", code).strip().splitlines()[-1]

    def unevaluated(self) -> int:
        return bench.unevaluated(self.url)

    def wait_evaluated(self, timeout: float) -> float:
        """Seconds until every stored batch is evaluated; raises after `timeout`."""
        t = time.perf_counter()
        while self.unevaluated():
            self.procs.check_alive()
            if time.perf_counter() - t > timeout:
                raise RuntimeError(f"{self.unevaluated()} batches still unevaluated after {timeout:.0f}s")
            time.sleep(0.1)
        return time.perf_counter() - t

    def evaluation_lag(self):
        """(p50, p95, max) of evaluated_at - received_at over every batch, seconds."""
        with self.connect() as conn:
            lags = [r[0] for r in conn.execute(
                "SELECT extract(epoch FROM evaluated_at - received_at)::float FROM ingest_batchreceipt "
                "WHERE evaluated_at IS NOT NULL").fetchall()]
        return percentiles(lags)

    def stop(self):
        self.procs.stop_all()


def run_body(data: bench.RunData, run_id: str, b: int) -> bytes:
    """Batch `b` (100 steps of every series) of `data`, sent as run `run_id`."""
    return orjson.dumps({"batch_id": f"{run_id}:{b:06d}", "run": {"id": run_id}, "points": data.batch_points(b)})


def percentiles(values):
    """(p50, p95, max), or Nones when there is nothing."""
    if not values:
        return None, None, None
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49], q[94], max(values)


def machine() -> str:
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} CPU cores; uptime: {load}"


def deployment_arguments(description: str, db: str, steps: int, quick_steps: int):
    """The options both deployment benchmarks take: where to deploy, and the runs' shape."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--admin-url", default=os.environ.get("BENCH_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    p.add_argument("--db", default=db, help=f"database to drop and recreate (default {db})")
    p.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15"),
                   help="Redis db to flush and use (default db 15)")
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--series", type=int, default=54)
    p.add_argument("--steps", type=int, default=steps, help="steps per run (100 a batch)")
    p.add_argument("--quick", action="store_true", help=f"{quick_steps:,} steps per run")
    return p

