#!/usr/bin/env python
"""End-to-end ingest benchmark: the real server, the real worker, a real PostgreSQL.

    .venv/bin/python benchmarks/ingest.py                      # full: 50 series x 200,000 steps = 10 M points
    .venv/bin/python benchmarks/ingest.py --steps 20000        # quick check (1 M points)
    .venv/bin/python benchmarks/ingest.py --clients 1          # only the one-client run
    .venv/bin/python benchmarks/ingest.py --profile 10         # cProfile of parse + ingest in-process, no server
    .venv/bin/python benchmarks/ingest.py --floor [--quick]    # one web process against two COPY floors (below)
    .venv/bin/python benchmarks/ingest.py --narrow-floor [--quick]  # the same, the narrow floor only

What one configuration does:

1. drops and recreates its own database (`<db>_c<N>`) through an admin connection,
   migrates it with `manage.py migrate` and issues a token with `manage.py issue_token`;
2. flushes Redis db 15, starts `uvicorn opsconsole.asgi:application --workers W` on a
   free port of 127.0.0.1 (DEBUG=0) and a Celery worker (`-c 1`), so every batch goes
   through the production path: HTTP, auth, contract validation, storage, on_commit
   queueing, evaluation in the worker;
3. sends one run of SERIES x STEPS points as JSON batches of exactly 100 steps x SERIES
   points (5,000 for 50 series), each with its own batch_id, from N client threads taking
   batches in order from one shared queue over keep-alive connections. Bodies are
   serialized (orjson) before the clock starts. Every answer must be 202;
4. waits for the worker to evaluate every batch, stops both, and sums
   pg_total_relation_size over the ingest_* tables before and after VACUUM ANALYZE
   (and, for information, after VACUUM FULL) divided by the points stored.

Then, once, the COPY floor: a bare row-per-point table with an index on
(run_id, metric, step), loaded with psycopg COPY in 1,000-row transactions.

--floor instead measures one web process against PostgreSQL's own cost for the same points:
rounds (--rounds, 3) of the COPY floors and then ingest, back to back, 54 series x 20,000 steps
(--quick: 2,000) in 5,000-point batches. The wide floor is the round's points one row each
(run, step, metric, component, value, time) COPYed by psycopg into a bare table with one index
in 5,000-row transactions; the narrow floor, the least PostgreSQL can do, is the same points as
(run, series, step) integers and the value, COPYed (binary) in 5,000-row transactions into a bare
table indexed on (series, step) (the blocks the server writes are fewer, larger rows, so they would
flatter it). --narrow-floor leaves the wide floor out. Ingest is `uvicorn --workers 1` with DEBUG
off and no Celery worker (each batch's evaluation is queued on Redis and left there), one client
over keep-alive, after one warm-up batch of another run. It prints each round's rates and CPU time (the uvicorn process and the PostgreSQL
backends, from /proc), the median ratios and the targets (>= 0.50x the narrow floor, >= 0.40x the
wide one) as MET or MISSED.

The script only needs PostgreSQL (admin URL --admin-url) and Redis (--redis-url, db 15
is flushed). It imports no Django in the benchmark mode; --profile sets Django up in
this process against its own database.
"""
from __future__ import annotations

import argparse
import http.client
import math
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import numpy as np
import orjson
import psycopg

ROOT = Path(__file__).resolve().parent.parent
# The repository root first: run as a script, sys.path[0] is benchmarks/, where this file would shadow the `ingest` app.
sys.path.insert(0, str(ROOT))

from benchmarks.support import PYTHON, Procs, free_port, wait_http  # noqa: E402
STEPS_PER_BATCH = 100
RUN_ID = "bench-llama-7b-ft"
PROJECT_SLUG = "bench"
T0 = 1764400000.0  # Unix seconds at step 0

# --------------------------------------------------------------------------------------
# Synthetic run: what a training job's logger sends.
# --------------------------------------------------------------------------------------

# Whole-run metrics first, then per-layer components (metric@layers.N), four metrics a layer.
RUN_METRICS = [
    "loss", "lr", "grad_norm", "loss_scale", "tokens_per_s", "step_time",
    "gpu_util", "gpu_mem", "update_ratio", "clip_fraction",
]
LAYER_METRICS = ["grad_norm", "weight_norm", "act_norm", "update_ratio"]


def series_list(n: int):
    keys = [(m, "") for m in RUN_METRICS]
    layer = 0
    while len(keys) < n:
        keys.extend((m, f"layers.{layer}") for m in LAYER_METRICS)
        layer += 1
    return keys[:n]


class RunData:
    """Values as a (series, steps) float64 array plus per-step times; built with numpy."""

    def __init__(self, n_series: int, n_steps: int, seed: int = 7):
        rng = np.random.default_rng(seed)
        self.keys = series_list(n_series)
        self.n_steps = n_steps
        s = np.arange(n_steps, dtype=np.float64)
        f32 = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731  tensor.item() of a float32
        values = np.empty((n_series, n_steps), dtype=np.float64)
        self.is_int = np.zeros(n_series, dtype=bool)
        # fp16-style overflow steps: grad norms go non-finite, loss is NaN, the loss scale halves.
        n_bad = max(3, n_steps // 20_000)
        bad = np.sort(rng.choice(np.arange(1000, max(1001, n_steps)), size=n_bad, replace=False))
        self.overflow_steps = bad
        warm = min(2000, max(1, n_steps // 10))
        lr = np.where(s < warm, 3e-4 * (s + 1) / warm,
                      3e-5 + 0.5 * (3e-4 - 3e-5) * (1 + np.cos(np.pi * np.clip((s - warm) / max(1, n_steps - warm), 0, 1))))
        step_time = 0.32 + 0.015 * rng.standard_normal(n_steps) + np.where(rng.random(n_steps) < 0.002, 1.5, 0.0)
        step_time = np.abs(step_time)
        # Times as the job's time.time() when it logged the step (same for every metric of it).
        self.times = T0 + np.cumsum(step_time)
        base_gn = 0.9 + 4.0 * np.exp(-s / 5000.0)
        loss_scale = np.full(n_steps, 65536.0)
        for b in bad:
            loss_scale[b:] /= 2.0
            loss_scale[b + 2000:] *= 2.0
        loss_scale = np.clip(loss_scale, 1.0, 65536.0)
        for j, (metric, comp) in enumerate(self.keys):
            noise = rng.standard_normal(n_steps)
            if comp:
                layer = int(comp.split(".")[1])
                scale = 1.0 + 0.15 * layer
                if metric == "grad_norm":
                    v = f32(base_gn / scale * np.exp(0.25 * noise))
                    v[bad] = np.inf
                elif metric == "weight_norm":
                    v = f32(20.0 * scale + 5e-5 * s + 0.001 * noise)
                elif metric == "act_norm":
                    v = f32(3.0 * scale * (1 + 0.3 * (1 - np.exp(-s / 30000))) * np.exp(0.05 * noise))
                else:  # update_ratio
                    v = f32(lr / 3e-4 * 1e-3 / scale * np.exp(0.2 * noise))
            elif metric == "loss":
                v = f32(2.1 + 8.5 * np.exp(-s / 15000.0) + 0.3 * np.exp(-s / 80000.0)
                        + 0.05 * (1 + np.exp(-s / 20000.0)) * noise)
                v[bad] = np.nan
            elif metric == "lr":
                v = lr.copy()  # computed in Python by the scheduler: a full double
            elif metric == "grad_norm":
                v = f32(base_gn * np.exp(0.2 * noise))
                v[bad] = np.nan
            elif metric == "loss_scale":
                v = loss_scale.copy()
            elif metric == "tokens_per_s":
                v = 4 * 1024 * 2048 / step_time / 8  # per GPU, a full double
            elif metric == "step_time":
                v = step_time.copy()
            elif metric == "gpu_util":
                v = np.clip(np.round(97 + 2 * noise), 0, 100)
                self.is_int[j] = True
            elif metric == "gpu_mem":
                v = np.round(61_000_000_000 + 2e8 * np.tanh(s / 10000.0) + 5e6 * noise)
                self.is_int[j] = True
            elif metric == "update_ratio":
                v = f32(lr / 3e-4 * 1e-3 * np.exp(0.2 * noise))
            elif metric == "clip_fraction":
                v = f32(np.clip(0.3 * np.exp(-s / 8000.0) + 0.02 * np.abs(noise), 0, 1))
            else:
                v = f32(1.0 + 0.1 * noise)
            values[j] = v
        self.values = values
        self.nonfinite = int((~np.isfinite(values)).sum())

    @property
    def n_series(self):
        return len(self.keys)

    @property
    def n_points(self):
        return self.n_series * self.n_steps

    def batch_points(self, b: int) -> list[dict]:
        s0 = b * STEPS_PER_BATCH
        s1 = min(s0 + STEPS_PER_BATCH, self.n_steps)
        block = self.values[:, s0:s1]
        cols = []
        for j in range(self.n_series):
            row = block[j]
            if self.is_int[j]:
                cols.append([int(x) for x in row.tolist()])
            elif np.isfinite(row).all():
                cols.append(row.tolist())
            else:
                cols.append([_wire(x) for x in row.tolist()])
        times = self.times[s0:s1].tolist()
        points = []
        append = points.append
        keys = self.keys
        for i, step in enumerate(range(s0, s1)):
            t = times[i]
            for j, (metric, comp) in enumerate(keys):
                if comp:
                    append({"step": step, "metric": metric, "component": comp, "value": cols[j][i], "time": t})
                else:
                    append({"step": step, "metric": metric, "value": cols[j][i], "time": t})
        return points

    def body(self, b: int) -> bytes:
        s0 = b * STEPS_PER_BATCH
        batch = {"batch_id": f"{RUN_ID}:{b:06d}", "run": {"id": RUN_ID}}
        if b == 0:
            batch["run"] = {
                "id": RUN_ID,
                "name": "Llama 7B fine-tune, lr 3e-4 (benchmark)",
                "code_rev": "9f2c1e0",
                "data_snapshot": "corpus-2026-11-01",
                "config": {"lr": 3e-4, "batch_size": 512, "layers": max(1, (self.n_series - len(RUN_METRICS)) // 4)},
                "budget": {"steps": self.n_steps},
                "tags": {"team": "pretrain", "cluster": "a"},
            }
        phases = [{"step": st, "phase": ph} for st, ph in self.phase_plan() if s0 <= st < s0 + STEPS_PER_BATCH]
        if phases:
            batch["phases"] = phases
        batch["points"] = self.batch_points(b)
        return orjson.dumps(batch)

    def point_batches(self, points_per_batch: int, run_id: str = RUN_ID) -> tuple[list[bytes], list[int]]:
        """The run as one stream of points in the order a job logs them (step by step, every series of a step),
        cut every `points_per_batch` points whatever the step: JSON bodies and their point counts."""
        stream = [p for b in range(self.n_batches) for p in self.batch_points(b)]
        plan = self.phase_plan()
        bodies, counts = [], []
        for b, lo in enumerate(range(0, len(stream), points_per_batch)):
            points = stream[lo:lo + points_per_batch]
            batch = {"batch_id": f"{run_id}:p{b:06d}", "run": {"id": run_id}}
            if b == 0:
                batch["run"] = {"id": run_id, "name": "Llama 7B fine-tune (benchmark)", "budget": {"steps": self.n_steps}}
            first = points[0]["step"] if lo == 0 or stream[lo - 1]["step"] != points[0]["step"] else points[0]["step"] + 1
            phases = [{"step": st, "phase": ph} for st, ph in plan if first <= st <= points[-1]["step"]]
            if phases:
                batch["phases"] = phases
            batch["points"] = points
            bodies.append(orjson.dumps(batch))
            counts.append(len(points))
        return bodies, counts

    def phase_plan(self):
        warm = min(2000, max(1, self.n_steps // 10))
        return [(0, "warmup"), (warm, "steady"), (int(self.n_steps * 0.75), "lr_decay")]

    @property
    def n_batches(self):
        return math.ceil(self.n_steps / STEPS_PER_BATCH)


def _wire(x: float):
    if math.isfinite(x):
        return x
    if x != x:
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


# --------------------------------------------------------------------------------------
# Databases, services, subprocesses
# --------------------------------------------------------------------------------------

def db_url(admin_url: str, name: str) -> str:
    u = urlparse(admin_url)
    return urlunparse(u._replace(path="/" + name))


def recreate_database(admin_url: str, name: str):
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def pg_settings(admin_url: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        parts = [f"PostgreSQL {version}"]
        for name in ("shared_buffers", "synchronous_commit", "fsync", "autovacuum", "max_wal_size", "wal_level"):
            parts.append(f"{name}={conn.execute(f'SHOW {name}').fetchone()[0]}")
    return ", ".join(parts)


def code_version() -> str:
    """HEAD plus a hash of the application code as it is on disk (uncommitted edits included)."""
    import hashlib

    digest = hashlib.sha256()
    for folder in ("ingest", "alerts", "opsconsole"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "ingest", "alerts", "opsconsole"], cwd=ROOT,
                               capture_output=True, text=True).stdout.split("\n")
        dirty = [line[3:] for line in dirty if line.strip()]
    except OSError:
        head, dirty = "?", []
    state = f"uncommitted changes in {', '.join(dirty)}" if dirty else "clean"
    return f"git {head or '?'} ({state}); code hash {digest.hexdigest()[:12]}"


def flush_redis(url: str):
    import redis

    redis.Redis.from_url(url).flushdb()


def service_env(database_url: str, redis_url: str, pace_after_ms: int = 0) -> dict:
    """The console's environment for a benchmark. Ingest's pacing (ingest/pacing.py) is off unless asked for:
    most benchmarks store with evaluation left behind on purpose (no worker, or one busy elsewhere), where it
    would hold every answer and measure the pacing instead of ingest; latency.py measures it as deployed."""
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        DEBUG="0",
        SECRET_KEY="benchmark-secret-key-not-for-production-" + "x" * 20,
        ALLOWED_HOSTS="127.0.0.1",
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        EVALUATION_PACE_AFTER_MS=str(pace_after_ms),
    )
    return env


def manage(env: dict, *args: str) -> str:
    res = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res.stdout


def wait_celery(env: dict, procs: Procs, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check_alive()
        res = subprocess.run([PYTHON, "-m", "celery", "-A", "opsconsole", "inspect", "ping", "-t", "2"],
                             cwd=ROOT, env=env, capture_output=True, text=True)
        if res.returncode == 0 and "pong" in res.stdout:
            return
        time.sleep(0.5)
    raise RuntimeError("celery worker did not answer a ping")


# --------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------

class ClientStats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.points_accepted = 0
        self.done = 0
        self.last_answer = None


def client_thread(port, token, bodies, npoints, work: queue.SimpleQueue, stats: ClientStats):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn = None
    while True:
        try:
            i = work.get_nowait()
        except queue.Empty:
            break
        t = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.request("POST", "/api/v1/ingest", body=bodies[i], headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            status = resp.status
            if resp.will_close:
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as exc:
            status, payload = None, repr(exc).encode()
            if conn is not None:
                conn.close()
            conn = None
        now = time.perf_counter()
        dt = now - t
        with stats.lock:
            stats.last_answer = now
            stats.latencies.append(dt)
            stats.done += 1
            if status == 202:
                try:
                    accepted = orjson.loads(payload)["accepted"]["points"]
                except Exception:  # noqa: BLE001
                    accepted = -1
                if accepted != npoints[i]:
                    stats.failures.append(f"batch {i}: 202 but accepted {accepted} of {npoints[i]} points")
                else:
                    stats.points_accepted += accepted
            else:
                stats.failures.append(f"batch {i}: {status} {payload[:300]!r}")
    if conn is not None:
        conn.close()


def send_all(port, token, bodies, npoints, clients: int, label: str):
    work = queue.SimpleQueue()
    for i in range(len(bodies)):
        work.put(i)
    stats = ClientStats()
    threads = [threading.Thread(target=client_thread, args=(port, token, bodies, npoints, work, stats), daemon=True)
               for _ in range(clients)]
    total = len(bodies)
    start = time.perf_counter()
    for th in threads:
        th.start()
    next_report = 0.1
    while any(th.is_alive() for th in threads):
        time.sleep(0.5)
        frac = stats.done / total
        if frac >= next_report and frac < 1:
            el = time.perf_counter() - start
            print(f"    [{label}] {stats.done}/{total} batches, {stats.points_accepted:,} points, "
                  f"{stats.points_accepted / el:,.0f} points/s, failures {len(stats.failures)}", flush=True)
            next_report = math.floor(frac * 10 + 1) / 10
    for th in threads:
        th.join()
    # Up to the last answer, not to when this loop noticed (up to 0.5 s later).
    elapsed = (stats.last_answer or time.perf_counter()) - start
    return elapsed, stats


# --------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------

SIZE_SQL = r"""
SELECT c.relname,
       pg_relation_size(c.oid) AS heap,
       CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END AS toast,
       pg_indexes_size(c.oid) AS indexes,
       pg_total_relation_size(c.oid) AS total,
       coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE %s
ORDER BY pg_total_relation_size(c.oid) DESC, c.relname
"""


def table_sizes(url: str, pattern="ingest\\_%"):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return conn.execute(SIZE_SQL, (pattern,)).fetchall()


def print_sizes(title: str, rows, points: int):
    total = sum(r[4] for r in rows)
    print(f"  {title}: {total:,} bytes = {total / 1048576:.1f} MiB, {total / max(points, 1):.2f} bytes/point")
    print(f"    {'table':<26}{'heap':>13}{'toast':>12}{'indexes':>13}{'total':>13}{'B/point':>9}{'live':>11}{'dead':>10}")
    for name, heap, toast, idx, tot, live, dead in rows:
        if tot == 0:
            continue
        print(f"    {name:<26}{heap:>13,}{toast:>12,}{idx:>13,}{tot:>13,}{tot / max(points, 1):>9.3f}{live:>11,}{dead:>10,}")
    return total


def stored_counts(url: str):
    with psycopg.connect(url, autocommit=True) as conn:
        points = conn.execute("SELECT coalesce(sum(count), 0), count(*) FROM ingest_block").fetchone()
        receipts = conn.execute("SELECT count(*), count(*) FILTER (WHERE evaluated_at IS NULL) FROM ingest_batchreceipt").fetchone()
        rollups = conn.execute("SELECT count(*), coalesce(sum(count), 0) FROM ingest_rollup").fetchone()
        attempts = conn.execute("SELECT count(*) FROM ingest_attempt").fetchone()[0]
        run = conn.execute("SELECT status, last_step, max_step FROM ingest_run WHERE run_id = %s", (RUN_ID,)).fetchone()
    return {"points": int(points[0]), "blocks": points[1], "receipts": receipts[0], "unevaluated": receipts[1],
            "rollups": rollups[0], "rollup_points": int(rollups[1]), "attempts": attempts, "run": run}


def unevaluated(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM ingest_batchreceipt WHERE evaluated_at IS NULL").fetchone()[0]


def late_batches(url: str) -> int:
    """Batches stored after a batch with higher steps: they took the out-of-order path."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM (SELECT min_step, max(max_step) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING "
            "AND 1 PRECEDING) AS before FROM ingest_batchreceipt) r WHERE min_step <= before"
        ).fetchone()[0]


def db_connections(admin_url: str, name: str) -> tuple[int, int]:
    """(connections open now, sessions ever opened) on the database."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        open_now = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()[0]
        sessions = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (name,)).fetchone()[0]
        return open_now, sessions


def drain_evaluations(url: str, args, procs: Procs):
    """Wait for the worker to evaluate every stored batch; give up after a stall (tasks lost)."""
    t = time.perf_counter()
    backlog = first = unevaluated(url)
    last_change, last_value = t, backlog
    while backlog and time.perf_counter() - t < args.drain_timeout:
        time.sleep(0.5)
        procs.check_alive()
        backlog = unevaluated(url)
        if backlog != last_value:
            last_change, last_value = time.perf_counter(), backlog
        elif time.perf_counter() - last_change > args.drain_stall:
            print(f"  WARNING: {backlog} batches left unevaluated and none evaluated for {args.drain_stall:.0f}s: "
                  f"their tasks are gone (was Redis db {urlparse(args.redis_url).path.lstrip('/') or 0} flushed by "
                  f"something else?); the sweep (celery beat) would re-queue them. Not waiting further.")
            break
    drain = time.perf_counter() - t
    print(f"  evaluation: {first} batches unevaluated when the last answer came; "
          f"{'drained' if not backlog else 'stopped waiting'} after {drain:.1f}s, {backlog} left", flush=True)
    return drain, backlog


# --------------------------------------------------------------------------------------
# One configuration
# --------------------------------------------------------------------------------------

def run_config(args, data: RunData, bodies, npoints, clients: int, logdir: Path):
    name = f"{args.db}_c{clients}"
    url = db_url(args.admin_url, name)
    label = f"uvicorn --workers {args.workers}, {clients} client{'s' if clients > 1 else ''}"
    print(f"\n== {label}: database {name} ==", flush=True)
    now_version = code_version()
    if now_version != args.code_version:
        print(f"  WARNING: the application code changed since the start: now {now_version}; this configuration "
              "measures the new code")
    result_code = now_version
    recreate_database(args.admin_url, name)
    flush_redis(args.redis_url)
    env = service_env(url, args.redis_url)
    t = time.perf_counter()
    manage(env, "migrate", "--noinput", "-v", "0")
    token = manage(env, "issue_token", PROJECT_SLUG).strip().splitlines()[-1].strip()
    print(f"  migrated and issued a token in {time.perf_counter() - t:.1f}s", flush=True)

    procs = Procs(logdir)
    result = {"label": label, "clients": clients, "code": result_code}
    try:
        port = free_port()
        procs.start(f"uvicorn-c{clients}", [PYTHON, "-m", "uvicorn", "opsconsole.asgi:application", "--host", "127.0.0.1",
                                           "--port", str(port), "--workers", str(args.workers), "--no-access-log",
                                           "--log-level", "warning"], env)
        procs.start(f"celery-c{clients}", [PYTHON, "-m", "celery", "-A", "opsconsole", "worker", "-c", "1", "-l", "warning"], env)
        wait_http(port, procs)
        wait_celery(env, procs)
        print(f"  server on 127.0.0.1:{port} and celery worker up; sending {len(bodies)} batches "
              f"({sum(npoints):,} points) ...", flush=True)

        elapsed, stats = send_all(port, token, bodies, npoints, clients, label)
        if code_version() != result_code:
            print("  WARNING: the application code changed on disk during this configuration (the server had already "
                  "loaded it at start, so the figures are for the code at start)")
        procs.check_alive()
        lat = sorted(stats.latencies)
        result.update(
            seconds=elapsed,
            points_sent=sum(npoints),
            points_accepted=stats.points_accepted,
            failures=stats.failures,
            rate=stats.points_accepted / elapsed if elapsed else 0.0,
            p50=statistics.median(lat) if lat else float("nan"),
            p95=lat[int(0.95 * (len(lat) - 1))] if lat else float("nan"),
            pmax=lat[-1] if lat else float("nan"),
        )
        print(f"  sent {len(bodies)} batches in {elapsed:.1f}s: {result['rate']:,.0f} points/s accepted; "
              f"latency p50 {result['p50'] * 1000:.0f} ms, p95 {result['p95'] * 1000:.0f} ms, max {result['pmax'] * 1000:.0f} ms; "
              f"non-202/failed: {len(stats.failures)}", flush=True)
        for f in stats.failures[:10]:
            print(f"    FAILURE {f}")
        result["db_connections"] = db_connections(args.admin_url, name)
        result["drain"], result["unevaluated"] = drain_evaluations(url, args, procs)
    finally:
        procs.stop_all()

    counts = stored_counts(url)
    result["counts"] = counts
    print(f"  stored: {counts['points']:,} points in {counts['blocks']:,} blocks, {counts['receipts']:,} receipts, "
          f"{counts['rollups']:,} rollups covering {counts['rollup_points']:,} points, {counts['attempts']} attempt(s); "
          f"run status/last_step/max_step = {counts['run']}")
    if counts["points"] != result["points_sent"]:
        print(f"  WARNING: {result['points_sent']:,} points sent but {counts['points']:,} stored")
    result["late"] = late_batches(url)
    print(f"  {result['late']} of {counts['receipts']} batches were stored after a batch with higher steps "
          f"(out-of-order path)")
    if "db_connections" in result:
        open_now, sessions = result["db_connections"]
        print(f"  connections to {name}: {sessions:,} opened during setup and the run (manage.py, server, worker, "
              f"this script), {open_now} open at its end")
    if counts["attempts"] != 1:
        print(f"  WARNING: {counts['attempts']} attempts: the server took in-order batches for a restart")
    pts = counts["points"]
    before = print_sizes("ingest_* tables before VACUUM", table_sizes(url), pts)
    t = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    after = print_sizes(f"after VACUUM ANALYZE ({time.perf_counter() - t:.1f}s)", table_sizes(url), pts)
    full = None
    if not args.no_vacuum_full:
        t = time.perf_counter()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM FULL")
        full = sum(r[4] for r in table_sizes(url))
        print(f"  after VACUUM FULL ({time.perf_counter() - t:.1f}s), for information: {full:,} bytes, "
              f"{full / max(pts, 1):.2f} bytes/point")
    result.update(bytes_before=before / max(pts, 1), bytes_after=after / max(pts, 1),
                  bytes_full=(full / max(pts, 1)) if full is not None else None)
    return result


# --------------------------------------------------------------------------------------
# COPY floor
# --------------------------------------------------------------------------------------

def copy_floor(args, data: RunData, rows_wanted: int, batch_rows=1000):
    """The same points, one row each (run, step, metric, component, value, time), COPYed by psycopg into a
    bare table with one index in `batch_rows`-row transactions: what PostgreSQL itself costs per point."""
    name = f"{args.db}_copy"
    url = db_url(args.admin_url, name)
    print(f"\n== COPY floor: database {name}, {rows_wanted:,} rows in {batch_rows:,}-row transactions ==", flush=True)
    recreate_database(args.admin_url, name)
    # Rows in the order a job produces them (step by step, every series), values as Python floats.
    steps_needed = math.ceil(rows_wanted / data.n_series)
    vals = data.values[:, :steps_needed].T.tolist()  # [step][series]
    times = data.times[:steps_needed].tolist()
    keys = data.keys
    rows = []
    for step in range(steps_needed):
        row_vals = vals[step]
        for j, (metric, comp) in enumerate(keys):
            rows.append((1, step, metric, comp, row_vals[j], times[step]))
    rows = rows[:rows_wanted]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE copy_points (run_id int, step bigint, metric text, component text, value double precision, "
                     "time double precision)")
        conn.execute("CREATE INDEX copy_points_key ON copy_points (run_id, metric, step)")
        backend = conn.info.backend_pid
        cpu = time.process_time(), cpu_seconds(backend)
        start = time.perf_counter()
        with conn.cursor() as cur:
            for i in range(0, len(rows), batch_rows):
                with conn.transaction():
                    with cur.copy("COPY copy_points (run_id, step, metric, component, value, time) FROM STDIN") as copy:
                        for r in rows[i:i + batch_rows]:
                            copy.write_row(r)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu[0], cpu_seconds(backend) - cpu[1]
        count = conn.execute("SELECT count(*) FROM copy_points").fetchone()[0]
        size = conn.execute("SELECT pg_total_relation_size('copy_points')").fetchone()[0]
    rate = count / elapsed
    print(f"  {count:,} rows in {elapsed:.1f}s: {rate:,.0f} rows/s; table + index {size:,} bytes = {size / count:.1f} bytes/row; "
          f"CPU: this client {cpu[0]:.2f} s, the PostgreSQL backend {cpu[1]:.2f} s")
    return {"rows": count, "seconds": elapsed, "rate": rate, "bytes_per_row": size / count, "cpu": cpu}


# --------------------------------------------------------------------------------------
# Ingest against the COPY floor: one web process, evaluation deferred
# --------------------------------------------------------------------------------------

FLOOR_TARGET = 0.40
NARROW_TARGET = 0.50


def narrow_floor(args, data: RunData, batch_rows: int):
    """The least PostgreSQL can do: the same points as narrow rows (run, series, step as integers and the value)
    COPYed by psycopg (binary) into a bare table in `batch_rows`-row transactions, with one index on
    (series, step) so the points can be found again. The rows are built before the clock starts."""
    name = f"{args.db}_narrow"
    url = db_url(args.admin_url, name)
    recreate_database(args.admin_url, name)
    rows = [(1, j, step, value) for step, values in enumerate(data.values.T.tolist()) for j, value in enumerate(values)]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE narrow_points (run_id integer, series_id integer, step integer, value double precision)")
        conn.execute("CREATE INDEX narrow_points_key ON narrow_points (series_id, step)")
        backend = conn.info.backend_pid
        cpu = time.process_time(), cpu_seconds(backend)
        start = time.perf_counter()
        with conn.cursor() as cur:
            for i in range(0, len(rows), batch_rows):
                with conn.transaction():
                    with cur.copy("COPY narrow_points (run_id, series_id, step, value) FROM STDIN (FORMAT BINARY)") as copy:
                        copy.set_types(("int4", "int4", "int4", "float8"))
                        for r in rows[i:i + batch_rows]:
                            copy.write_row(r)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu[0], cpu_seconds(backend) - cpu[1]
        count = conn.execute("SELECT count(*) FROM narrow_points").fetchone()[0]
        size = conn.execute("SELECT pg_total_relation_size('narrow_points')").fetchone()[0]
    rate = count / elapsed
    print(f"  narrow COPY floor: {count:,} rows in {elapsed:.2f}s: {rate:,.0f} rows/s; table + index {size / count:.1f} "
          f"bytes/row; CPU: this client {cpu[0]:.2f} s, the PostgreSQL backend {cpu[1]:.2f} s", flush=True)
    return {"rows": count, "seconds": elapsed, "rate": rate, "bytes_per_row": size / count, "cpu": cpu}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; all its threads); NaN if unreadable.
    CPU time per point, unlike points per second, hardly moves when other work shares the machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backend_cpu(admin_url: str, name: str) -> float:
    """CPU seconds of the PostgreSQL backends now connected to database `name` (a local server)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))]
    return sum(cpu_seconds(pid) for pid in pids)


class DeferredServer:
    """One uvicorn worker, no Celery worker: every batch is queued for evaluation on Redis and left there,
    so what is measured is the web process's own work (HTTP, auth, validation, storage, queueing)."""

    def __init__(self, args, logdir: Path):
        self.args = args
        self.name = f"{args.db}_deferred"
        self.url = db_url(args.admin_url, self.name)
        recreate_database(args.admin_url, self.name)
        flush_redis(args.redis_url)
        env = service_env(self.url, args.redis_url)
        manage(env, "migrate", "--noinput", "-v", "0")
        self.token = manage(env, "issue_token", PROJECT_SLUG).strip().splitlines()[-1].strip()
        self.procs = Procs(logdir)
        self.port = free_port()
        self.procs.start("uvicorn-deferred", [PYTHON, "-m", "uvicorn", "opsconsole.asgi:application", "--host", "127.0.0.1",
                                              "--port", str(self.port), "--no-access-log", "--log-level", "warning"], env)
        wait_http(self.port, self.procs)
        self.pid = self.procs.procs[0][1].pid

    def send(self, label: str, bodies, npoints, run_id: str):
        cpu = cpu_seconds(self.pid), backend_cpu(self.args.admin_url, self.name)
        elapsed, stats = send_all(self.port, self.token, bodies, npoints, 1, label)
        cpu = cpu_seconds(self.pid) - cpu[0], backend_cpu(self.args.admin_url, self.name) - cpu[1]
        self.procs.check_alive()
        for f in stats.failures[:10]:
            print(f"    FAILURE {f}")
        lat = sorted(stats.latencies)
        result = {"rate": stats.points_accepted / elapsed, "seconds": elapsed, "points": stats.points_accepted,
                  "failures": stats.failures, "p50": statistics.median(lat), "stored": run_points(self.url, run_id),
                  "cpu": cpu}
        print(f"  {label}: {result['points']:,} points in {elapsed:.2f}s: {result['rate']:,.0f} points/s; latency p50 "
              f"{result['p50'] * 1000:.0f} ms, p95 {lat[int(0.95 * (len(lat) - 1))] * 1000:.0f} ms a batch; "
              f"{result['stored']:,} stored; CPU {cpu[0] / len(bodies) * 1000:.1f} ms a batch in the uvicorn process, "
              f"{cpu[1] / len(bodies) * 1000:.1f} ms in PostgreSQL", flush=True)
        return result

    def stop(self):
        self.procs.stop_all()
        with psycopg.connect(self.url, autocommit=True) as conn:
            left = conn.execute("SELECT count(*) FROM ingest_batchreceipt WHERE evaluated_at IS NULL").fetchone()[0]
        print(f"  {left} batches were left for evaluation (deferred: no worker ran)")


def run_points(url: str, run_id: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT coalesce(sum(b.count), 0) FROM ingest_block b JOIN ingest_series s ON s.id = b.series_id "
                            "JOIN ingest_run r ON r.id = s.run_id WHERE r.run_id = %s", (run_id,)).fetchone()[0]


def floor_ratio(args, data: RunData):
    """The issue's comparison: ingest points/s of one web process against bare COPYs of the same points.

    Rounds run the floors and then ingest back to back (each round a new run of the same points), so
    all see the same machine; the figures are the medians of the rounds' ratios. The narrow floor
    (run, series, step, value) is the one judged against NARROW_TARGET; the wide one (run, step, metric,
    component, value, time) against FLOOR_TARGET, unless --narrow-floor leaves it out.
    """
    wide = not args.narrow_floor
    floors = "the narrow COPY floor" if not wide else "the wide and the narrow COPY floors"
    print(f"\n== {args.rounds} rounds of: {floors}, then ingest (uvicorn --workers 1, evaluation deferred: queued on "
          f"Redis, no worker; 1 client) ==", flush=True)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="wl-bench-") as logdir:
        server = DeferredServer(args, Path(logdir))
        try:
            # One batch of another run first, off the clock: the process's first request imports and connects.
            warm, warm_n = data.point_batches(args.batch_points, run_id=RUN_ID + "-warmup")
            server.send("warm-up", warm[:1], warm_n[:1], RUN_ID + "-warmup")
            del warm
            for r in range(1, args.rounds + 1):
                run_id = f"{RUN_ID}-r{r}"
                bodies, npoints = data.point_batches(args.batch_points, run_id=run_id)
                if r == 1:
                    print(f"  {len(bodies)} batches of {args.batch_points:,} points (the last {npoints[-1]:,}), "
                          f"{sum(map(len, bodies)) / len(bodies) / 1024:,.0f} KiB a body", flush=True)
                floor = copy_floor(args, data, data.n_points, batch_rows=args.batch_points) if wide else None
                narrow = narrow_floor(args, data, args.batch_points)
                ingest = server.send(f"round {r}", bodies, npoints, run_id)
                ingest["ok"] = not ingest["failures"] and ingest["stored"] == data.n_points
                rounds.append((floor, narrow, ingest))
                del bodies
        finally:
            server.stop()
    narrow_ratios = [ingest["rate"] / narrow["rate"] for _, narrow, ingest in rounds]
    wide_ratios = [ingest["rate"] / floor["rate"] for floor, _, ingest in rounds] if wide else []
    per_million = lambda seconds, points: seconds / points * 1e6  # noqa: E731
    print("\n## Ingest against the COPY floors\n")
    print(f"- workload: {data.n_series} series × {data.n_steps:,} steps = {data.n_points:,} points a round in "
          f"{args.batch_points:,}-point batches (JSON, serialized beforehand, 1 client, keep-alive), {args.rounds} rounds; "
          f"{pg_settings(args.admin_url)}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
          f"{args.code_version}")
    print(f"- narrow COPY floor: the same points as rows (run, series, step, value) COPYed (binary) by psycopg into a bare "
          f"table with an index on (series, step), {args.batch_points:,}-row transactions")
    if wide:
        print(f"- wide COPY floor: one row each (run, step, metric, component, value, time) COPYed by psycopg into "
              f"a bare table with one index, {args.batch_points:,}-row transactions")
    print("- ingest: one uvicorn worker, DEBUG off, PostgreSQL, evaluation deferred (queued on Redis, no worker)\n")
    print("| round | narrow floor rows/s | wide floor rows/s | ingest points/s | × narrow | × wide | ingest p50 a batch | "
          "web process CPU a batch | PostgreSQL CPU a batch (ingest / narrow floor) | failures |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    n_batches = math.ceil(data.n_points / args.batch_points)
    for r, (floor, narrow, ingest) in enumerate(rounds, start=1):
        wide_rate = f"{floor['rate']:,.0f}" if floor else "–"
        wide_x = f"{ingest['rate'] / floor['rate']:.2f}×" if floor else "–"
        print(f"| {r} | {narrow['rate']:,.0f} | {wide_rate} | {ingest['rate']:,.0f} | "
              f"{ingest['rate'] / narrow['rate']:.2f}× | {wide_x} | {ingest['p50'] * 1000:.1f} ms | "
              f"{ingest['cpu'][0] / n_batches * 1000:.1f} ms | {ingest['cpu'][1] / n_batches * 1000:.1f} / "
              f"{narrow['cpu'][1] / n_batches * 1000:.1f} ms | {len(ingest['failures'])} |")
    cpu_web = statistics.median(per_million(i["cpu"][0], i["points"]) for _, _, i in rounds)
    print(f"\n- CPU seconds per million points, median of the rounds (a shared machine moves them less than the "
          f"rates): the web process {cpu_web:.1f}; PostgreSQL "
          f"{statistics.median(per_million(i['cpu'][1], i['points']) for _, _, i in rounds):.1f} for ingest, "
          f"{statistics.median(per_million(n['cpu'][1], n['rows']) for _, n, _ in rounds):.1f} for the narrow floor")
    # On a shared machine the rates swing with the load; CPU time hardly does. The same ratio in CPU time (the
    # floor's client and backend against the web process and its backends) is what a quiet machine approaches,
    # less the commit waits both pay.
    cpu_ratio = statistics.median((n["cpu"][0] + n["cpu"][1]) / n["rows"] / ((i["cpu"][0] + i["cpu"][1]) / i["points"])
                                  for _, n, i in rounds)
    print(f"- in CPU time (narrow floor: psycopg client + backend; ingest: web process + backends), median of the "
          f"rounds: {cpu_ratio:.2f}× the narrow floor (for information: the target is judged on the rates)")
    ok = all(i["ok"] for _, _, i in rounds)
    narrow_rate = statistics.median(n["rate"] for _, n, _ in rounds)
    ratio = statistics.median(narrow_ratios)
    met = ratio >= NARROW_TARGET and ok
    print(f"- narrow floor {narrow_rate:,.0f} rows/s (median); ingest {statistics.median(i['rate'] for _, _, i in rounds):,.0f} "
          f"points/s (median); ratio (median of {len(narrow_ratios)} rounds) {ratio:.2f}× the narrow floor; "
          f"target ≥ {NARROW_TARGET:.2f}×: {'MET' if met else 'MISSED'}")
    if wide:
        wide_met = statistics.median(wide_ratios) >= FLOOR_TARGET and ok
        print(f"- wide floor {statistics.median(f['rate'] for f, _, _ in rounds):,.0f} rows/s (median); ratio "
              f"{statistics.median(wide_ratios):.2f}× the wide floor; target ≥ {FLOOR_TARGET:.2f}×: "
              f"{'MET' if wide_met else 'MISSED'}")
        met = met and wide_met
    return 0 if met else 1


# --------------------------------------------------------------------------------------
# In-process profile
# --------------------------------------------------------------------------------------

def profile(args, data: RunData, n_profile: int, warmup: int):
    import cProfile
    import io
    import pstats

    name = f"{args.db}_profile"
    url = db_url(args.admin_url, name)
    recreate_database(args.admin_url, name)
    flush_redis(args.redis_url)
    os.environ.update(service_env(url, args.redis_url))
    os.environ["ALLOWED_HOSTS"] = "127.0.0.1,testserver"
    os.environ["DJANGO_SETTINGS_MODULE"] = "opsconsole.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from ingest.contract import parse_json_batch
    from ingest.models import Project, ProjectToken
    from ingest.service import ingest_batch

    call_command("migrate", verbosity=0)
    project = Project.objects.create(slug=PROJECT_SLUG, name=PROJECT_SLUG)
    _, token = ProjectToken.issue(project)
    total = warmup + 6 * n_profile
    if total > data.n_batches:
        raise SystemExit(f"--profile needs {total} batches; give --steps ≥ {total * STEPS_PER_BATCH}")
    bodies = [data.body(b) for b in range(total)]
    print(f"== profile: database {name}; {warmup} warm-up batches, then {n_profile} timed, {n_profile} under cProfile, "
          f"{n_profile} through Django's test client, {2 * n_profile} swapped in pairs, {n_profile} in order; {len(bodies[0]):,} bytes and "
          f"{data.n_series * STEPS_PER_BATCH:,} points a batch ==")
    for b in range(warmup):
        ingest_batch(project, parse_json_batch(bodies[b]))

    # Plain timing (no profiler): parse+validate vs store, and inside store the time of the
    # main steps (wrapped functions) and of the SQL statements (an execute wrapper, which
    # measures the round trip to PostgreSQL: the database's work plus the driver's).
    from collections import defaultdict

    from django.db.models.query import QuerySet

    from ingest import storage

    spent = defaultdict(float)
    calls = defaultdict(int)

    def wrap(owner, attr, label_of):
        original = getattr(owner, attr)

        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                label = label_of(a)
                spent[label] += time.perf_counter() - t
                calls[label] += 1

        setattr(owner, attr, wrapper)
        return original

    # Internal names move as the code is tuned: time whichever of these exist.
    targets = [
        (QuerySet, "bulk_update", lambda a: f"{a[0].model.__name__}.objects.bulk_update"),
        (QuerySet, "bulk_create", lambda a: f"{a[0].model.__name__}.objects.bulk_create"),
        (storage.BlockWriter, "write", lambda a: "BlockWriter.write (blocks + rollups)"),
        (storage, "_merge_rollups", lambda a: "storage._merge_rollups"),
        (storage, "_replace_rollups", lambda a: "storage._replace_rollups"),
        (storage, "packed", lambda a: "storage.packed (LZ4)"),
    ]
    originals = [(owner, attr, wrap(owner, attr, label)) for owner, attr, label in targets if hasattr(owner, attr)]
    sql_time = defaultdict(float)
    sql_calls = defaultdict(int)

    def sql_wrapper(execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            words = sql.split()
            verb = words[0].upper() if words else "?"
            table = next((w.strip('"') for w in words if w.startswith('"ingest_')), "")
            key = f"{verb} {table}".strip()
            sql_time[key] += time.perf_counter() - t
            sql_calls[key] += 1

    t_parse = t_store = 0.0
    with connection.execute_wrapper(sql_wrapper):
        for b in range(warmup, warmup + n_profile):
            t = time.perf_counter()
            batch = parse_json_batch(bodies[b])
            t1 = time.perf_counter()
            ingest_batch(project, batch)
            t2 = time.perf_counter()
            t_parse += t1 - t
            t_store += t2 - t1
    for owner, attr, original in originals:
        setattr(owner, attr, original)
    n = n_profile
    points = data.n_series * STEPS_PER_BATCH
    print(f"  no profiler: parse_json_batch {t_parse / n * 1000:.1f} ms + ingest_batch {t_store / n * 1000:.1f} ms "
          f"= {(t_parse + t_store) / n * 1000:.1f} ms a batch -> {points * n / (t_parse + t_store):,.0f} points/s on one core")
    print("  inside ingest_batch, ms a batch (nested: BlockWriter.write holds Block bulk_create, packed and the rollup merge):")
    for label in sorted(spent, key=spent.get, reverse=True):
        print(f"    {spent[label] / n * 1000:8.1f} ms  {calls[label] / n:6.1f} calls  {label}")
    print(f"  SQL round trips, ms a batch ({sum(sql_calls.values()) / n:.0f} statements, "
          f"{sum(sql_time.values()) / n * 1000:.1f} ms in all):")
    for key in sorted(sql_time, key=sql_time.get, reverse=True):
        print(f"    {sql_time[key] / n * 1000:8.1f} ms  {sql_calls[key] / n:6.1f} calls  {key}")

    prof = cProfile.Profile()
    t = time.perf_counter()
    for b in range(warmup + n_profile, warmup + 2 * n_profile):
        prof.enable()
        ingest_batch(project, parse_json_batch(bodies[b]))
        prof.disable()
    print(f"  under cProfile: {(time.perf_counter() - t) / n * 1000:.1f} ms a batch")

    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    t = time.perf_counter()
    for b in range(warmup + 2 * n_profile, warmup + 3 * n_profile):
        resp = client.post("/api/v1/ingest", data=bodies[b], content_type="application/json", **headers)
        assert resp.status_code == 202, (resp.status_code, resp.content[:300])
    full = (time.perf_counter() - t) / n
    print(f"  full Django request (test client: middleware, DRF, auth, view): {full * 1000:.1f} ms a batch -> "
          f"{data.n_series * STEPS_PER_BATCH / full:,.0f} points/s on one core")

    # A batch that arrives after a later one (several clients, retries): the out-of-order path.
    first = warmup + 3 * n_profile
    in_order = late = 0.0
    for b in range(first, first + 2 * n_profile, 2):
        ingest_batch(project, parse_json_batch(bodies[b + 1]))
        batch = parse_json_batch(bodies[b])
        t = time.perf_counter()
        ingest_batch(project, batch)
        late += time.perf_counter() - t
    for b in range(first + 2 * n_profile, first + 3 * n_profile):
        batch = parse_json_batch(bodies[b])
        t = time.perf_counter()
        ingest_batch(project, batch)
        in_order += time.perf_counter() - t
    print(f"  ingest_batch of a batch that arrives after the next one: {late / n * 1000:.1f} ms "
          f"(in order, same database: {in_order / n * 1000:.1f} ms)")

    for sort, limit in (("cumulative", args.profile_top), ("tottime", 25)):
        out = io.StringIO()
        st = pstats.Stats(prof, stream=out)
        st.strip_dirs().sort_stats(sort).print_stats(limit)
        text = out.getvalue()
        # Divide by the number of batches in the header so the figures read per batch.
        print(f"\n-- cProfile, {n} batches, sorted by {sort} (totals over {n} batches; divide by {n} for one) --")
        print(text[text.find("   ncalls"):] if "   ncalls" in text else text)
    flush_redis(args.redis_url)


# --------------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200_000, help="steps of the run (default 200,000)")
    p.add_argument("--series", type=int, default=50, help="series of the run (default 50: 10 whole-run metrics + 4 metrics x 10 layers)")
    p.add_argument("--clients", default="1,4", help="comma-separated client counts, one configuration each (default 1,4)")
    p.add_argument("--workers", type=int, default=2, help="uvicorn --workers (default 2)")
    p.add_argument("--copy-rows", type=int, default=2_000_000, help="rows for the COPY floor, at most the run's points (0: skip)")
    p.add_argument("--admin-url", default=os.environ.get("BENCH_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/15", help="flushed before each configuration")
    p.add_argument("--db", default="wl_bench", help="database name prefix (wl_bench_c1, wl_bench_c4, wl_bench_copy)")
    p.add_argument("--drain-timeout", type=float, default=900.0, help="seconds to wait for the worker's backlog")
    p.add_argument("--drain-stall", type=float, default=60.0, help="stop waiting when the backlog has not moved for this long")
    p.add_argument("--no-vacuum-full", action="store_true", help="skip the informational VACUUM FULL figure")
    p.add_argument("--floor", action="store_true",
                   help="instead of the benchmark: ingest with one uvicorn worker and evaluation deferred against a COPY "
                        "floor of the same points (default workload 54 series x 20,000 steps in 5,000-point batches)")
    p.add_argument("--narrow-floor", action="store_true",
                   help="like --floor with the narrow COPY floor only (run, series, step, value), judged against >= 0.50x")
    p.add_argument("--quick", action="store_true", help="with --floor: 54 series x 2,000 steps")
    p.add_argument("--batch-points", type=int, default=5000, help="with --floor: points a batch, and rows a COPY transaction")
    p.add_argument("--rounds", type=int, default=3, help="with --floor: rounds of floor then ingest (default 3)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="instead of the benchmark: N batches in-process under cProfile (parse_json_batch + ingest_batch)")
    p.add_argument("--profile-warmup", type=int, default=20, help="batches stored before profiling (default 20)")
    p.add_argument("--profile-top", type=int, default=45, help="profile rows to print")
    args = p.parse_args(argv)
    args.floor = args.floor or args.narrow_floor
    if args.floor:
        # The issue's workload unless told otherwise.
        defaults = p.parse_args([])
        args.series = 54 if args.series == defaults.series else args.series
        if args.steps == defaults.steps:
            args.steps = 2_000 if args.quick else 20_000
    return args


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def exclusive(admin_url: str, db: str, redis_url: str):
    """One benchmark at a time per database prefix and per Redis db: two runs on the same ones would drop
    each other's databases and flush each other's Redis db. The locks live as long as this connection."""
    conn = psycopg.connect(admin_url, autocommit=True)
    for what in (f"databases {db}_*", f"Redis {redis_url}"):
        key = f"warning-light benchmarks/ingest.py {what}"
        if not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
            holder = conn.execute(
                "SELECT a.pid, a.client_addr, a.backend_start FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE l.locktype = 'advisory' AND l.objid = hashtext(%s)::oid", (key,)
            ).fetchone()
            who = f"PostgreSQL backend {holder[0]}, connected {holder[2]:%Y-%m-%d %H:%M:%S %Z}" if holder else "unknown"
            raise SystemExit(f"another benchmarks/ingest.py run holds the lock on its {what} ({who}); wait for it to "
                             "finish, or give this one other --db / --redis-url: two runs would drop each other's databases")
    return conn


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Started in the background (nohup, `&`), Python inherits SIGINT ignored: make Ctrl-C / kill -INT stop it anyway.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    lock = exclusive(args.admin_url, args.db, args.redis_url)  # noqa: F841  (held until the process exits)
    clients = [int(c) for c in args.clients.split(",") if c.strip()]
    t = time.perf_counter()
    data = RunData(args.series, args.steps)
    print(f"Warning Light ingest benchmark: {data.n_series} series x {data.n_steps:,} steps = {data.n_points:,} points "
          f"({data.nonfinite} non-finite), {data.n_batches} batches of {STEPS_PER_BATCH} steps x {data.n_series} series")
    print(f"  machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; {pg_settings(args.admin_url)}")
    args.code_version = code_version()
    print(f"  application code: {args.code_version}")
    if args.profile:
        profile(args, data, args.profile, args.profile_warmup)
        return 0
    if args.floor:
        return floor_ratio(args, data)

    bodies = [data.body(b) for b in range(data.n_batches)]
    npoints = [data.n_series * min(STEPS_PER_BATCH, data.n_steps - b * STEPS_PER_BATCH) for b in range(data.n_batches)]
    size = sum(len(b) for b in bodies)
    print(f"  generated and serialized in {time.perf_counter() - t:.1f}s: {size / 1048576:,.0f} MiB of JSON, "
          f"{size / len(bodies) / 1024:,.0f} KiB and {npoints[0]:,} points a body", flush=True)

    results = []
    copy = None
    with tempfile.TemporaryDirectory(prefix="wl-bench-") as logdir:
        for c in clients:
            results.append(run_config(args, data, bodies, npoints, c, Path(logdir)))
        del bodies
        if args.copy_rows:
            copy = copy_floor(args, data, min(args.copy_rows, data.n_points))

    copy_rate = f"{copy['rate']:,.0f}" if copy else "–"
    print("\n## Ingest benchmark\n")
    print(f"{data.n_series} series × {data.n_steps:,} steps, batches of {npoints[0]:,} points (JSON, orjson-serialized "
          f"beforehand, keep-alive); uvicorn --workers {args.workers} + celery -c 1 on {os.cpu_count()} CPUs; "
          f"{pg_settings(args.admin_url)}; {args.code_version}.\n")
    print("| config | points | seconds | points/s | bytes/point | COPY floor rows/s | failures |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['label']} | {r['points_accepted']:,} | {r['seconds']:.1f} | {r['rate']:,.0f} | "
              f"{r['bytes_after']:.2f} | {copy_rate} | {len(r['failures'])} |")
    print()
    for r in results:
        full = f", {r['bytes_full']:.2f} after VACUUM FULL" if r.get("bytes_full") is not None else ""
        print(f"- {r['label']}: bytes/point {r['bytes_before']:.2f} before VACUUM ANALYZE, {r['bytes_after']:.2f} after{full}; "
              f"latency p50 {r['p50'] * 1000:.0f} ms, p95 {r['p95'] * 1000:.0f} ms; {r['late']} of "
              f"{r['counts']['receipts']} batches stored out of order; evaluation backlog "
              f"{'drained' if not r['unevaluated'] else 'NOT drained (' + str(r['unevaluated']) + ' left)'} "
              f"{r['drain']:.1f}s after the last answer")
    if copy:
        print(f"- COPY floor: {copy['rows']:,} rows (one per point) into a bare table with an index on (run_id, metric, step), "
              f"1,000-row transactions: {copy['rate']:,.0f} rows/s, {copy['bytes_per_row']:.1f} bytes/row")
    print("- targets: ≥ 50,000 points/s with one client, ≤ 24 bytes/point")
    failed = any(r["failures"] for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ninterrupted; server and worker stopped", file=sys.stderr)
        sys.exit(130)
