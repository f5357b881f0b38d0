#!/usr/bin/env python
"""Evaluation benchmark: what judging stored batches against the starter rule pack costs per point.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/wl .venv/bin/python benchmarks/evaluation.py
    DATABASE_URL=... .venv/bin/python benchmarks/evaluation.py --quick       # 54 series x 1,200 steps
    DATABASE_URL=... .venv/bin/python benchmarks/evaluation.py --no-sqlite   # skip the SQLite embedded figure
    DATABASE_URL=... .venv/bin/python benchmarks/evaluation.py --profile storm   # cProfile of one case's evaluation
    DATABASE_URL=... .venv/bin/python benchmarks/evaluation.py --workload realistic [--profile realistic [--profile-clock cpu]]

Full size is 54 series x 2,000 steps (108,000 points) a run, in batches of 5,000 points (a step's series may be
split between two batches), the run of benchmarks/ingest.py (RunData, seed 7: 10 whole-run metrics and 4 per
layer for 11 layers), its phases warmup, steady, lr_decay.

What it does:

1. drops and recreates the database `<DATABASE_URL's name>_evalbench` (--db) on DATABASE_URL's server,
   migrates it (`manage.py migrate`) and makes the project with `manage.py issue_token evalbench --owner ...`,
   so the starter rule pack (alerts/starter.py) is installed;
2. in this process (Django on that database, DEBUG off, Celery eager, no Redis: the live frames go to the
   in-memory channel layer), stores two runs through the real ingest service (ingest.service.ingest_batch on
   each parsed body) with evaluation deferred (the batch_stored receiver disconnected, as when the worker
   is busy):
   - `clean`: the run smoothed, its non-finite points replaced by the step before's value: no rule holds;
   - `storm`: the same run where, from a few steps into the steady phase on, every series a starter rule
     covers breaches it: loss NaN (nonfinite-loss), every grad_norm 0 (lost-gradient), every update_ratio 0
     (frozen-component), weight_norm and act_norm NaN (nonfinite-gradients), step_time ×4 and
     tokens_per_s ÷4 (slow-steps, throughput-drop): alerts open and extending in every batch from then on;
3. times this one process evaluating each run's batches in receipt order with the worker's task body
   (alerts.tasks._evaluate_oldest: lock the run, judge its oldest batch, mark it evaluated, one transaction): points/s over the
   run, and the per-batch time (p50, max);
4. the embedded default, end to end: one `uvicorn opsconsole.asgi:application` (1 worker, DEBUG off, no
   REDIS_URL, so evaluation runs eagerly in the web process) on the same database, one client posting the
   clean run's batches (run id `embedded`) in order over one keep-alive connection; points/s from the first
   request to the last answer; then the storm run the same way (for information). With --sqlite (default
   on), the clean run again against a fresh embedded SQLite console (WL_VAR_DIR in a temporary folder).

5. `realistic` (--workload realistic, or all, the default): 3 noisy runs (--runs) and a storm run, each 70
   series x 4,000 steps plus a val_loss every 250 steps in an `eval` phase of its own; fp16 overflow steps (a NaN
   loss, non-finite gradients) in every run, a lasting drop (throughput halved, steps twice as slow from 60% on)
   in the second; their batches interleaved as from concurrent jobs. Timed: storing them all through one web
   process (`--ingest http`, the default: `uvicorn` with one worker process, DEBUG off, one client over keep-alive
   posting the pre-serialized bodies, each batch's evaluation queued on Redis db 15 (--redis-url) and left there),
   or in this process (`--ingest process`: ingest.service.ingest_batch on each parsed body, a web process's own
   work without its HTTP layer, stricter), then judging them all in receipt order with the worker's task body;
   the ratio of the two, target ≥ 1.0 (the issue's: one worker keeps up with one web process); queries per batch,
   RuleProgress's rows and sizes, and the CPU seconds of each side (the web process or this one, and PostgreSQL)
   (on a shared machine wall time also waits for a CPU). --profile realistic adds cProfile and the queries by
   statement and table.

Prints the workload (series, steps, batch size, rules installed, alerts open and fired per run, changes
written), the figures, each target beside its figure with MET/MISSED, and per run a digest of the alerts and
changes (rule, component, metric, first/fired/last step, magnitude, phase, state; each change's kind and
step), so two code versions can be checked to judge alike. Targets: one worker ≥ 100,000 points/s on the
clean run and ≥ 50,000 points/s in the storm; the embedded default ≥ 30,000 points/s end to end (PostgreSQL);
realistic: evaluation ≥ ingest.
Exits 1 when a target is missed.
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/, where ingest.py would shadow the `ingest` app.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import orjson  # noqa: E402

from benchmarks import ingest as bench  # noqa: E402
from benchmarks import support  # noqa: E402

SLUG = "evalbench"
OWNER = "Bench On-call <oncall@example.org>"
TARGETS = {"clean": 100_000, "storm": 50_000, "embedded clean (PostgreSQL)": 30_000}
WARMUP_SHARE = 0.05  # the first 5% of steps are warmup (100 of 2,000)
STORM_AFTER = 30  # steps into the steady phase before every covered series breaches its rule
EVAL_EVERY = 250  # realistic workload: steps between two evaluations (val_loss, an `eval` phase of one step)


class Workload:
    """The run's values per series and step, cut into bodies of `batch_points` points (step order, then series)."""

    def __init__(self, n_series, n_steps, batch_points):
        data = bench.RunData(n_series, n_steps)
        self.keys, self.times, self.is_int = data.keys, data.times, data.is_int
        self.n_steps, self.batch_points = n_steps, batch_points
        self.warm = max(1, int(n_steps * WARMUP_SHARE))
        clean = data.values.copy()
        for row in clean:
            for i in np.flatnonzero(~np.isfinite(row)):
                row[i] = row[i - 1]
        self.values = {"clean": clean, "storm": self.stormy(clean)}

    @property
    def storm_from(self):
        return self.warm + STORM_AFTER

    def stormy(self, clean):
        return stormy(self.keys, clean, self.storm_from)

    def phases(self):
        return [(0, "warmup"), (self.warm, "steady"), (int(self.n_steps * 0.75), "lr_decay")]

    def bodies(self, case, run_id):
        return cut_bodies(self.keys, self.values[case], self.times, self.is_int, self.phases(), self.batch_points,
                          run_id, f"evaluation benchmark, {case}", self.n_steps)


def stormy(keys, clean, storm_from):
    """Every series a starter rule covers breaches it from `storm_from` on."""
    values = clean.copy()
    at = slice(storm_from, None)
    for j, (metric, _component) in enumerate(keys):
        if metric == "loss" or metric in ("weight_norm", "act_norm"):
            values[j, at] = np.nan
        elif metric in ("grad_norm", "update_ratio"):
            values[j, at] = 0.0
        elif metric == "step_time":
            values[j, at] *= 4
        elif metric == "tokens_per_s":
            values[j, at] /= 4
    return values


class Realistic:
    """Runs as jobs send them: `n_runs` noisy runs (benchmarks/ingest.py RunData, a seed each: fp16 overflow
    steps with a NaN loss and non-finite gradients, noise in every series) with a validation loss every
    EVAL_EVERY steps in an `eval` phase of its own, the second run with a lasting drop (throughput halved and
    steps twice as slow from 60% of the run on: alerts open and extending to its end), and one storm run
    (the first run's data where every covered series breaches its rule from STORM_AFTER steps into steady).
    Their batches arrive interleaved, as from concurrent jobs."""

    def __init__(self, n_runs, n_series, n_steps, batch_points):
        self.n_steps, self.n_series, self.batch_points = n_steps, n_series, batch_points
        self.warm = max(1, n_steps // 10)
        bounds = {0, self.warm, int(n_steps * 0.75)}
        self.evals = [e for e in range(EVAL_EVERY, n_steps, EVAL_EVERY) if not bounds & {e, e + 1}]
        self.drop_from = int(n_steps * 0.6)
        self.runs = []  # (run id, bodies, point counts)
        for r in range(n_runs):
            keys, values, times, is_int, present = self.run_data(7 + r)
            if r == 1:
                for j, (metric, _c) in enumerate(keys):
                    if metric == "tokens_per_s":
                        values[j, self.drop_from:] *= 0.5
                    elif metric == "step_time":
                        values[j, self.drop_from:] *= 2
            self.runs.append((f"realistic-{r}", *cut_bodies(keys, values, times, is_int, self.phases(), batch_points,
                                                             f"realistic-{r}", f"realistic run {r}", n_steps, present)))
        keys, values, times, is_int, present = self.run_data(7)
        self.storm_from = self.warm + STORM_AFTER
        self.runs.append(("realistic-storm", *cut_bodies(keys, stormy(keys, values, self.storm_from), times, is_int,
                                                         self.phases(), batch_points, "realistic-storm",
                                                         "realistic run, storm", n_steps, present)))

    def run_data(self, seed):
        data = bench.RunData(self.n_series, self.n_steps, seed=seed)
        rng = np.random.default_rng(seed + 1000)
        s = np.arange(self.n_steps, dtype=np.float64)
        val = 2.2 + 8.5 * np.exp(-s / 15000.0) + 0.3 * np.exp(-s / 80000.0) + 0.01 * rng.standard_normal(self.n_steps)
        present = np.ones((len(data.keys) + 1, self.n_steps), dtype=bool)
        present[-1] = False
        present[-1, self.evals] = True
        return (data.keys + [("val_loss", "")], np.vstack([data.values, val]), data.times,
                np.r_[data.is_int, False], present)

    def phases(self):
        decay = int(self.n_steps * 0.75)
        out = [(0, "warmup"), (self.warm, "steady"), (decay, "lr_decay")]
        for e in self.evals:
            out += [(e, "eval"), (e + 1, "lr_decay" if e + 1 >= decay else "steady" if e + 1 >= self.warm else "warmup")]
        return sorted(out)

    def interleaved(self):
        """Every run's bodies, round robin: (run id, body, points)."""
        out = []
        for b in range(max(len(bodies) for _, bodies, _ in self.runs)):
            for run_id, bodies, counts in self.runs:
                if b < len(bodies):
                    out.append((run_id, bodies[b], counts[b]))
        return out

    @property
    def npoints(self):
        return sum(sum(counts) for _, _, counts in self.runs)


def cut_bodies(keys, values, times, is_int, phases, batch_points, run_id, name, n_steps, present=None):
    """Bodies of `batch_points` points (step order, then series); `present` (series x steps, bool) leaves out
    the points a series does not send (an evaluation metric between evaluations). A phase goes with the batch
    that holds the first point of its step."""
    n_series = len(keys)
    wire = [[int(x) if is_int[j] else bench._wire(x) for x in values[j].tolist()] for j in range(n_series)]
    sent = None if present is None else [present[j].tolist() for j in range(n_series)]
    times = times.tolist()
    points = []
    for step in range(n_steps):
        for j, (metric, component) in enumerate(keys):
            if sent is not None and not sent[j][step]:
                continue
            point = {"step": step, "metric": metric, "value": wire[j][step], "time": times[step]}
            if component:
                point["component"] = component
            points.append(point)
    bodies, counts = [], []
    for b, start in enumerate(range(0, len(points), batch_points)):
        chunk = points[start:start + batch_points]
        first = chunk[0]["step"] if start == 0 or points[start - 1]["step"] != chunk[0]["step"] else chunk[0]["step"] + 1
        batch = {"batch_id": f"{run_id}:{b:05d}", "run": {"id": run_id}}
        if b == 0:
            batch["run"] = {"id": run_id, "name": name, "budget": {"steps": n_steps}}
        mine = [{"step": s, "phase": p} for s, p in phases if first <= s <= chunk[-1]["step"]]
        if mine:
            batch["phases"] = mine
        batch["points"] = chunk
        bodies.append(orjson.dumps(batch))
        counts.append(len(chunk))
    return bodies, counts


def setup_django(env):
    for key in ("DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL"):
        os.environ[key] = env[key]
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "opsconsole.settings"
    import django

    django.setup()


def store(project, bodies):
    """Through the ingest service, with evaluation left for later (no receiver queues it)."""
    from alerts.tasks import queue_stored_batch
    from ingest import signals
    from ingest.contract import parse_json_batch
    from ingest.service import ingest_batch

    signals.batch_stored.disconnect(dispatch_uid="alerts.evaluate")
    try:
        t = time.perf_counter()
        for body in bodies:
            ingest_batch(project, parse_json_batch(body))
        return time.perf_counter() - t
    finally:
        signals.batch_stored.connect(queue_stored_batch, dispatch_uid="alerts.evaluate")


def http_store(args, bodies, counts):
    """Through one web process: (seconds to post every body, CPU seconds of the web process, of PostgreSQL).

    The batches' evaluations are queued on Redis (db flushed first) and left there: this process judges them
    afterwards, as the one worker would."""
    bench.flush_redis(args.redis_url)
    env = dict(HTTP_ENV, REDIS_URL=args.redis_url)
    with tempfile.TemporaryDirectory(prefix="wl-evalbench-http-") as logdir:
        server = support.Server(env, Path(logdir) / "uvicorn.log")
        try:
            server.wait_ready()
            # PostgreSQL's side: every backend of the database but this process's own.
            pg_before, web_before = postgres_cpu(), bench.cpu_seconds(server.proc.pid)
            elapsed, stats = bench.send_all(server.port, HTTP_TOKEN[0], bodies, counts, 1, "realistic over HTTP")
            web_cpu, pg_cpu = bench.cpu_seconds(server.proc.pid) - web_before, postgres_cpu() - pg_before
            server.check_alive()
        finally:
            server.stop()
        if stats.failures or stats.done != len(bodies):
            raise SystemExit(f"realistic over HTTP: {stats.done} of {len(bodies)} answered; {len(stats.failures)} failed batches, e.g. {stats.failures[:3]}\n"
                             f"{server.log_text()[-3000:]}")
    return elapsed, web_cpu, pg_cpu


def postgres_cpu():
    """CPU seconds so far of the PostgreSQL backends serving this benchmark's database, but this process's own."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        pids = [pid for (pid,) in cursor.fetchall()]
    total = 0.0
    for pid in pids:
        seconds = bench.cpu_seconds(pid)
        if seconds == seconds:  # a backend that ended since: not counted
            total += seconds
    return total


HTTP_ENV, HTTP_TOKEN = {}, [None]  # main's service environment and the project's ingest token, for http_store


def evaluate_run(run_id, profile=False):
    """Each stored batch of the run as the worker judges it (its run's oldest unevaluated batch, under the run's
    evaluation lock, in one transaction), timed one by one in receipt order: (seconds, CPU seconds, per-batch times)."""
    from ingest.models import BatchReceipt

    receipts = list(BatchReceipt.objects.filter(run__run_id=run_id).order_by("id").values_list("pk", "run_id"))
    seconds, cpu, per_batch, _, _ = evaluate_receipts(receipts, profile)
    return seconds, cpu, per_batch


def evaluate_receipts(receipts, profile=False):
    """[(receipt pk, run pk)] judged in that order as the worker does: (seconds, CPU seconds, per-batch times,
    queries per batch)."""
    from django.db import connection

    from alerts.tasks import _evaluate_oldest

    queries = [0]
    by_statement = {}  # with --profile: (statement kind, table) -> [count, seconds]

    def count(execute, sql, params, many, context):
        queries[0] += 1
        if not profile:
            return execute(sql, params, many, context)
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            words = sql.split()
            table = next((w.strip('"') for prev, w in zip(words, words[1:])
                          if prev.upper() in ("FROM", "INTO", "UPDATE")), "")
            entry = by_statement.setdefault((words[0].upper() if words else "", table), [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - t

    # On a loaded machine wall time mostly waits for a CPU: --profile-clock cpu times this process's CPU only.
    profiler = (cProfile.Profile(time.process_time) if profile == "cpu" else cProfile.Profile()) if profile else None
    per_batch, per_batch_queries = [], []
    server = backend_cpu()
    start, cpu = time.perf_counter(), time.process_time()
    evaluated = set()
    with connection.execute_wrapper(count):
        for pk, run_pk in receipts:
            if pk in evaluated:
                continue  # judged with an earlier batch of its run (alerts/batches.py)
            t, q = time.perf_counter(), queries[0]
            if profiler:
                profiler.enable()
            done = _evaluate_oldest(run_pk)
            if profiler:
                profiler.disable()
            per_batch.append(time.perf_counter() - t)
            per_batch_queries.append(queries[0] - q)
            assert pk in done, f"batch {pk} was not evaluated"
            evaluated.update(done)
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    server = None if server is None else backend_cpu() - server
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
        print(out.getvalue())
        if os.environ.get("EVALBENCH_PROFILE_OUT"):  # for pstats by hand: callers and callees
            profiler.dump_stats(os.environ["EVALBENCH_PROFILE_OUT"])
        print(f"queries by statement and table over {len(receipts)} batches (count a batch, ms a batch):")
        for (kind, table), (n, seconds) in sorted(by_statement.items(), key=lambda kv: -kv[1][1])[:25]:
            print(f"    {kind:8s} {table:40s} {n / len(receipts):7.1f} {seconds * 1000 / len(receipts):8.1f}")
    return total, cpu, per_batch, per_batch_queries, server


def backend_cpu():
    """CPU seconds of this connection's PostgreSQL backend so far (the server on this machine), or None."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def progress_sizes():
    """RuleProgress as stored: rows, the table's size on disk, and the state per rule kind (PostgreSQL)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), pg_total_relation_size('alerts_ruleprogress') FROM alerts_ruleprogress")
        rows, size = cursor.fetchone()
        cursor.execute("SELECT r.kind, count(*), avg(pg_column_size(p.state)), max(pg_column_size(p.state)) "
                       "FROM alerts_ruleprogress p JOIN alerts_rule r ON r.id = p.rule_id GROUP BY r.kind ORDER BY 3 DESC")
        kinds = ", ".join(f"{kind} {n} rows avg {avg:,.0f} B max {top:,} B" for kind, n, avg, top in cursor.fetchall())
    return f"{rows:,} rows, {size / 2**20:.1f} MiB on disk (table, TOAST, indexes); state by rule kind: {kinds}"


def realistic(args, project):
    """The realistic workload: stored in this process, then judged by this process as one worker; their ratio."""
    from ingest.models import BatchReceipt

    t = time.perf_counter()
    work = Realistic(args.runs, args.realistic_series, args.realistic_steps, args.batch_points)
    arrivals = work.interleaved()
    npoints = work.npoints
    print(f"\n== realistic: {len(work.runs)} runs ({args.runs} noisy, a lasting drop in realistic-1, a storm) x "
          f"{args.realistic_steps:,} steps of {args.realistic_series} series + val_loss every {EVAL_EVERY} steps "
          f"(an eval phase); {npoints:,} points in {len(arrivals)} batches of {args.batch_points:,}, interleaved "
          f"(built in {time.perf_counter() - t:.1f}s) ==", flush=True)
    bodies = [body for _, body, _ in arrivals]
    if args.ingest == "http":
        stored, ingest_cpu, ingest_server = http_store(args, bodies, [count for _, _, count in arrivals])
        ingest_label = ("one web process (uvicorn, 1 worker process, DEBUG off, one client over keep-alive, "
                        "evaluations queued on Redis and left)")
    else:
        server, cpu = backend_cpu(), time.process_time()
        stored = store(project, bodies)
        ingest_cpu, ingest_server = time.process_time() - cpu, None if server is None else backend_cpu() - server
        ingest_label = ("one process (ingest.service.ingest_batch on each parsed body, in process: a web process "
                        "without its HTTP layer, so faster than one)")
    ingest_rate = npoints / stored
    run_ids = [run_id for run_id, _, _ in work.runs]
    receipts = list(BatchReceipt.objects.filter(run__run_id__in=run_ids).order_by("id").values_list("pk", "run_id"))
    seconds, cpu, per_batch, queries, server = evaluate_receipts(
        receipts, profile=args.profile == "realistic" and ("cpu" if args.profile_clock == "cpu" else True))
    rate = npoints / seconds
    ratio = rate / ingest_rate
    print(f"    ingest, {ingest_label}: {ingest_rate:,.0f} points/s ({stored:.2f} s)")
    print(f"    evaluation, one process as one worker (alerts.tasks._evaluate_oldest per batch, receipt order): "
          f"{rate:,.0f} points/s ({seconds:.2f} s, CPU {cpu:.2f} s); per batch p50 {statistics.median(per_batch) * 1000:.0f} ms, "
          f"p95 {np.percentile(per_batch, 95) * 1000:.0f} ms, max {max(per_batch) * 1000:.0f} ms; queries per batch "
          f"p50 {statistics.median(queries):.0f}, max {max(queries)}")
    print(f"    evaluation / ingest = {ratio:.2f}   target ≥ 1.00: {'MET' if ratio >= 1 else 'MISSED'}")
    if server is not None and ingest_server is not None:
        # On a shared machine wall time waits for a CPU; CPU seconds (this process and its PostgreSQL backend) do not.
        where = "in the web process" if args.ingest == "http" else "here"
        print(f"    CPU: ingest {ingest_cpu:.2f} s {where} + {ingest_server:.2f} s PostgreSQL = {npoints / (ingest_cpu + ingest_server):,.0f} "
              f"points per CPU second; evaluation {cpu:.2f} s + {server:.2f} s = {npoints / (cpu + server):,.0f} points per CPU "
              f"second; ratio {(ingest_cpu + ingest_server) / (cpu + server):.2f} (for information; the target is on wall time)")
    print(f"    RuleProgress: {progress_sizes()}")
    digests, verdicts = [], []
    for run_id in run_ids:
        out = outcome(run_id)
        digests.append(out["digest"] + out["band_digest"])
        verdicts.append(out["verdicts"] + out["band_digest"])
        print_outcome(run_id, out)
    print(f"    realistic digest (every run's alerts, changes and band samples): "
          f"{hashlib.sha256(''.join(digests).encode()).hexdigest()[:16]}; without extended rows "
          f"{hashlib.sha256(''.join(verdicts).encode()).hexdigest()[:16]}")
    sys.stdout.flush()
    return ratio


def outcome(run_id):
    """What evaluation left for the run: counts, and a digest of its alerts and their changes."""
    from alerts.models import Alert, AlertChange, AlertState, BandSample

    alerts = list(Alert.objects.filter(run__run_id=run_id).select_related("rule").order_by("id"))
    rows = [(a.rule.name, a.component, a.metric, a.condition, a.first_step, a.fired_step, a.last_step,
             None if a.magnitude is None else round(a.magnitude, 9), a.magnitude_unit, a.phase, a.state) for a in alerts]
    index = {a.pk: i for i, a in enumerate(alerts)}
    changes = list(AlertChange.objects.filter(alert__run__run_id=run_id).order_by("id").values_list("alert_id", "kind", "step"))
    digest = hashlib.sha256(repr((rows, [(index[a], k, s) for a, k, s in changes])).encode()).hexdigest()[:16]
    # What a person sees whatever the number of batches judged at once: the alerts and their fired and resolved
    # rows (an evaluation writes one "extended" row per alert, so judging batches together writes fewer).
    verdicts = hashlib.sha256(repr((rows, [(index[a], k, s) for a, k, s in changes if k != "extended"])).encode())
    samples = BandSample.objects.filter(series__run__run_id=run_id).order_by("rule__name", "series__metric", "series__component", "bucket")
    bands = list(samples.values_list("rule__name", "series__metric", "series__component", "bucket", "step", "centre", "lower", "upper"))
    kinds = {}
    for _, kind, _ in changes:
        kinds[kind] = kinds.get(kind, 0) + 1
    by_rule = {}
    for row in rows:
        by_rule[row[0]] = by_rule.get(row[0], 0) + 1
    return {
        "open": sum(1 for a in alerts if a.state != AlertState.RESOLVED),
        "alerts": len(alerts),
        "by_rule": by_rule,
        "changes": kinds,
        "digest": digest,
        "verdicts": verdicts.hexdigest()[:16],
        "band_samples": len(bands),
        "band_digest": hashlib.sha256(repr(bands).encode()).hexdigest()[:16],
    }


def verdict(value, target):
    return f"target ≥ {target:,} points/s: {'MET' if value >= target else 'MISSED'}"


def print_outcome(label, out):
    rules = ", ".join(f"{name} {n}" for name, n in sorted(out["by_rule"].items())) or "none"
    changes = ", ".join(f"{kind} {n}" for kind, n in sorted(out["changes"].items())) or "none"
    print(f"    {label}: alerts open at the end {out['open']}, fired {out['alerts']} ({rules}); changes: {changes}; "
          f"digest {out['digest']} (without extended rows {out['verdicts']}); band samples {out['band_samples']}, digest {out['band_digest']}")


def embedded(env, bodies, npoints, label, logdir, token):
    """The console served by one uvicorn with evaluation in the web process; seconds to post every body."""
    server = support.Server(env, logdir / f"uvicorn-{label.split()[0]}-{len(os.listdir(logdir))}.log")
    try:
        server.wait_ready()
        elapsed, stats = bench.send_all(server.port, token, bodies, npoints, 1, label)
        server.check_alive()
    finally:
        server.stop()
    if stats.failures:
        raise SystemExit(f"{label}: {len(stats.failures)} failed batches, e.g. {stats.failures[:3]}\n{server.log_text()[-3000:]}")
    lat = sorted(stats.latencies)
    return elapsed, lat


def manage(env, *args):
    return bench.manage(env, *args)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="54 series x 1,200 steps instead of 2,000")
    p.add_argument("--series", type=int, default=54)
    p.add_argument("--steps", type=int, default=None, help="steps a run (default 2,000; 1,200 with --quick)")
    p.add_argument("--batch-points", type=int, default=5_000)
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL"), help="PostgreSQL server (default $DATABASE_URL)")
    p.add_argument("--db", default=None, help="database to drop and recreate (default: DATABASE_URL's name + _evalbench)")
    p.add_argument("--no-sqlite", dest="sqlite", action="store_false", help="skip the embedded SQLite figure")
    p.add_argument("--no-embedded", dest="embedded", action="store_false", help="skip the end-to-end (uvicorn) cases")
    p.add_argument("--workload", choices=["standard", "realistic", "all"], default="all",
                   help="standard: the clean and storm runs (and the embedded end-to-end cases); realistic: many noisy "
                        "runs with evaluations, a lasting drop and a storm, ingest beside evaluation; all (default): both")
    p.add_argument("--runs", type=int, default=3, help="realistic: noisy runs besides the storm run (default 3)")
    p.add_argument("--realistic-series", type=int, default=70, help="realistic: series a run besides val_loss (default 70)")
    p.add_argument("--realistic-steps", type=int, default=4_000, help="realistic: steps a run (default 4,000)")
    p.add_argument("--profile", choices=["clean", "storm", "realistic"], help="cProfile that case's evaluation (its figure then includes the profiler)")
    p.add_argument("--batches-at-once", type=int, default=None,
                   help="EVALUATION_BATCHES_AT_ONCE for the evaluation (default: the console's, 50); 1 judges one batch at a time")
    p.add_argument("--ingest", choices=["http", "process"], default="http",
                   help="realistic: store the batches through one web process (default) or in this process")
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/15",
                   help="realistic over HTTP: Redis for the queued evaluations (flushed; default db 15)")
    p.add_argument("--profile-clock", choices=["wall", "cpu"], default="wall",
                   help="realistic profile: wall time (default) or this process's CPU time (a loaded machine)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if not args.database_url or not args.database_url.startswith("postgres"):
        raise SystemExit("set DATABASE_URL (or --database-url) to a PostgreSQL URL: postgres://user@host:port/name")
    steps = args.steps or (1_200 if args.quick else 2_000)
    url = urlparse(args.database_url)
    db = args.db or f"{url.path.lstrip('/') or 'wl'}_evalbench"
    admin_url = bench.db_url(args.database_url, "postgres")
    db_url = bench.db_url(args.database_url, db)
    env = bench.service_env(db_url, "")
    env.pop("REDIS_URL")
    env["WL_VAR_DIR"] = tempfile.mkdtemp(prefix="wl-evalbench-var-")
    if args.batches_at_once is not None:
        env["EVALUATION_BATCHES_AT_ONCE"] = os.environ["EVALUATION_BATCHES_AT_ONCE"] = str(args.batches_at_once)

    t = time.perf_counter()
    work = Workload(args.series, steps, args.batch_points)
    bodies = {case: work.bodies(case, case) for case in ("clean", "storm")}
    npoints = sum(bodies["clean"][1])
    print(f"Warning Light evaluation benchmark: {bench.code_version()}", flush=True)
    print(f"  machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{bench.pg_settings(admin_url)}")
    print(f"  workload: {len(work.keys)} series x {steps:,} steps = {npoints:,} points a run, "
          f"{len(bodies['clean'][0])} batches of {args.batch_points:,} points; phases {work.phases()}; "
          f"storm from step {work.storm_from} (built in {time.perf_counter() - t:.1f}s)", flush=True)

    bench.recreate_database(admin_url, db)
    manage(env, "migrate", "--noinput")
    token = manage(env, "issue_token", SLUG, "--owner", OWNER).strip().splitlines()[-1]
    setup_django(env)
    from alerts.models import Rule
    from ingest.models import Project

    project = Project.objects.get(slug=SLUG)
    HTTP_ENV.update(env)
    HTTP_TOKEN[0] = token
    rules = list(Rule.objects.filter(project=project, enabled=True).order_by("name").values_list("name", "kind"))
    print(f"  database {db} (DEBUG off, one process, no Redis); rules installed: {len(rules)} "
          f"({', '.join(f'{n} [{k}]' for n, k in rules)})", flush=True)

    results = {}
    standard = args.workload in ("standard", "all")
    for case in ("clean", "storm") if standard else ():
        stored = store(project, bodies[case][0])
        seconds, cpu, per_batch = evaluate_run(case, profile=args.profile == case)
        rate = npoints / seconds
        results[case] = rate
        print(f"\n== {case}: one process evaluating {len(per_batch)} stored batches (ingest, deferred: "
              f"{npoints / stored:,.0f} points/s) ==")
        print(f"    {rate:,.0f} points/s ({seconds:.2f} s, of which this process's CPU {cpu:.2f} s); per batch p50 {statistics.median(per_batch) * 1000:.0f} ms, "
              f"max {max(per_batch) * 1000:.0f} ms   {verdict(rate, TARGETS[case])}")
        print_outcome(case, outcome(case))
        sys.stdout.flush()

    ratio = realistic(args, project) if args.workload in ("realistic", "all") else None

    if args.embedded and standard:
        from django.db import connections

        connections.close_all()
        with tempfile.TemporaryDirectory(prefix="wl-evalbench-") as logdir:
            logdir = Path(logdir)
            cases = [("embedded clean (PostgreSQL)", "clean", "embedded", env, token),
                     ("embedded storm (PostgreSQL)", "storm", "embedded-storm", env, token)]
            if args.sqlite:
                lite = dict(env)
                lite.pop("DATABASE_URL")
                lite["WL_VAR_DIR"] = str(logdir / "var")
                manage(lite, "migrate", "--noinput")
                lite_token = manage(lite, "issue_token", SLUG, "--owner", OWNER).strip().splitlines()[-1]
                cases.append(("embedded clean (SQLite)", "clean", "embedded", lite, lite_token))
            for label, case, run_id, case_env, case_token in cases:
                run_bodies, counts = work.bodies(case, run_id)
                elapsed, lat = embedded(case_env, run_bodies, counts, label, logdir, case_token)
                rate = npoints / elapsed
                target = TARGETS.get(label)
                print(f"\n== {label}: uvicorn (1 worker, eager evaluation in the web process), one client, "
                      f"{len(run_bodies)} batches ==")
                print(f"    {rate:,.0f} points/s end to end ({elapsed:.2f} s); per request p50 "
                      f"{statistics.median(lat) * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms"
                      + (f"   {verdict(rate, target)}" if target else "   (for information)"))
                if target:
                    results[label] = rate
                if case_env is env:
                    print_outcome(run_id, outcome(run_id))
                sys.stdout.flush()

    print("\n== summary ==")
    missed = []
    for label, target in TARGETS.items():
        if label in results:
            print(f"  {label:32s} {results[label]:>10,.0f} points/s   {verdict(results[label], target)}")
            if results[label] < target:
                missed.append(label)
    if ratio is not None:
        print(f"  {'realistic: evaluation / ingest':32s} {ratio:>10.2f} ×          target ≥ 1.00: {'MET' if ratio >= 1 else 'MISSED'}")
        if ratio < 1:
            missed.append("realistic")
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
