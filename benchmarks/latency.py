#!/usr/bin/env python
"""Alert latency: from the ingest response to the alert's websocket frame, under a steady ingest rate.

    .venv/bin/python benchmarks/latency.py --quick          # 4 runs x 54 series x 2,000 steps (432,000 points), ~1 min
    .venv/bin/python benchmarks/latency.py                  # 4 runs x 54 series x 6,000 steps (1.3 M points)
    .venv/bin/python benchmarks/latency.py --celery 2       # two worker processes

What it does:

1. a fresh PostgreSQL database (--db, dropped and recreated; Redis --redis-url is flushed), migrated, a
   project made by `issue_token --owner` (so the starter rule pack judges every batch) and a superuser's
   session; `uvicorn opsconsole.asgi:application --workers 2` (DEBUG=0) and `celery -A opsconsole worker -c N`;
2. RUNS runs of the ingest benchmark's data (benchmarks/ingest.py RunData: SERIES series, 100-step batches,
   its fp16-style overflow steps), plus a NaN loss at step 50 of every third batch, which the starter rule
   `nonfinite-loss` alerts on (it resolves after 10 finite points, so each NaN fires a new alert). Bodies are
   serialized before the clock starts;
3. warm-up: batch 0 of each run (creates the runs and their series), waited for until evaluated; then one
   websocket per run on the console's live endpoint `ws/runs/<run id>/` with the session cookie;
4. one sender thread per run posts the run's batches in order over a keep-alive connection, each due at
   t0 + i x interval so that the runs together send --rate points/s (a late batch goes at once: the
   achieved rate is printed);
5. every "alert" frame with change "fired" is matched to its batch (the "points" frame of the batch precedes
   its alert frames in the same group message) and timed from that batch's HTTP response, read by the
   sender, to the frame's arrival at the websocket client (one clock, one process).

Prints the workload, achieved points/s, the ingest response times, the evaluation lag
(evaluated_at - received_at), the latency of every batch's "points" frame and of each alert frame
(p50/p95/max) and MET/MISSED against the targets: alert latency p95 <= 1 s, evaluation lag p95 <= 2 s.
--rate far above what the console takes (say 10000000) sends as fast as the web processes answer: the rate
they take with the workers beside them on the same machine. Ingest yields to evaluation as deployed
(EVALUATION_PACE_AFTER_MS, ingest/pacing.py: a project's answers wait while its oldest unjudged batch is past
1 s); --pace-after-ms 0 measures the console without that.
"""
from __future__ import annotations

import asyncio
import http.client
import math
import os
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root first: benchmarks/ingest.py would shadow the `ingest` app

from benchmarks import ingest as bench  # noqa: E402
from benchmarks.deployment import Console, deployment_arguments, machine, percentiles, run_body  # noqa: E402

TARGET_P95 = 1.0  # seconds, alert latency
TARGET_LAG_P95 = 2.0  # seconds, evaluation lag during sustained ingest (issue 23)
NAN_EVERY = 3  # batches: a NaN loss at step 50 of batch 1, 4, 7, ...


def cpu_split(console, args) -> dict:
    """CPU seconds so far of the web processes, the workers (each started in a process group of its own:
    their children included), the database's PostgreSQL backends and this process (the senders and the
    websocket client): who took the machine's CPUs while the sending lasted."""
    groups = {"web": [], "workers": []}
    for name, proc, _ in console.procs.procs:
        groups["web" if name.startswith("uvicorn") else "workers"].append(proc.pid)
    out = {key: sum(group_cpu(pgid) for pgid in pgids) for key, pgids in groups.items()}
    out["PostgreSQL"] = bench.backend_cpu(args.admin_url, args.db)
    out["sender"] = bench.cpu_seconds(os.getpid())
    return out


def group_cpu(pgid: int) -> float:
    """User + system CPU seconds of the live processes of process group `pgid` (Linux /proc)."""
    total = 0.0
    for entry in os.scandir("/proc"):
        try:
            if not entry.name.isdigit() or os.getpgid(int(entry.name)) != pgid:
                continue
        except ProcessLookupError:
            continue  # gone since the listing
        seconds = bench.cpu_seconds(int(entry.name))
        if seconds == seconds:  # NaN: it ended since
            total += seconds
    return total


def make_runs(args):
    """run id -> (its batches' bodies, the steps of the NaN losses added to them)."""
    runs = {}
    for r in range(args.runs):
        data = bench.RunData(args.series, args.steps, seed=7 + r)
        loss = data.keys.index(("loss", ""))
        injected = []
        for b in range(1, data.n_batches, NAN_EVERY):
            step = b * bench.STEPS_PER_BATCH + 50
            # Not within the 10 steps after one of the data's own overflow steps: that alert is still open then.
            if not any(0 <= step - bad <= 10 for bad in data.overflow_steps):
                data.values[loss, step] = math.nan
                injected.append(step)
        run_id = f"latency-{r}"
        runs[run_id] = ([run_body(data, run_id, b) for b in range(data.n_batches)], set(injected))
    return runs


class Sender(threading.Thread):
    """Posts one run's batches in order, each at its due time; records when each answer was read."""

    def __init__(self, port, token, bodies, first, interval, t0):
        super().__init__(daemon=True)
        self.port, self.bodies, self.first, self.interval, self.t0 = port, bodies, first, interval, t0
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.answered = {}  # batch index -> when the 202 was read (time.time(): compared with the database's times)
        self.took = []
        self.failures = []

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        for n, b in enumerate(range(self.first, len(self.bodies))):
            wait = self.t0 + n * self.interval - time.time()
            if wait > 0:
                time.sleep(wait)
            t = time.time()
            conn.request("POST", "/api/v1/ingest", body=self.bodies[b], headers=self.headers)
            resp = conn.getresponse()
            payload = resp.read()
            self.answered[b] = done = time.time()
            self.took.append(done - t)
            if resp.status != 202:
                self.failures.append(f"batch {b}: {resp.status} {payload[:200]!r}")
        conn.close()


def post(port, token, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/api/v1/ingest", body=body, headers={"Authorization": f"Bearer {token}",
                                                               "Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 202:
        raise RuntimeError(f"warm-up batch: {resp.status} {resp.read()[:300]!r}")
    conn.close()


class Listener(threading.Thread):
    """One websocket per run, in one event loop: every frame with its arrival time."""

    def __init__(self, port, cookie, run_ids):
        super().__init__(daemon=True)
        self.port, self.cookie, self.run_ids = port, cookie, run_ids
        self.frames = {run_id: [] for run_id in run_ids}  # run id -> [(time.time() at arrival, frame)]
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            asyncio.run(self._listen())
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
            self.ready.set()

    async def _listen(self):
        from websockets.asyncio.client import connect

        sockets = []
        for run_id in self.run_ids:
            ws = await connect(f"ws://127.0.0.1:{self.port}/ws/runs/{run_id}/", origin=f"http://127.0.0.1:{self.port}",
                               additional_headers={"Cookie": f"sessionid={self.cookie}"}, max_size=None)
            await ws.send(orjson.dumps({"type": "ping"}).decode())
            reply = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
            if reply.get("type") != "pong":
                raise RuntimeError(f"ws/runs/{run_id}/ answered {reply!r} to a ping")
            sockets.append((run_id, ws))
        self.ready.set()
        tasks = [asyncio.create_task(self._read(run_id, ws)) for run_id, ws in sockets]
        while not self.stop.is_set():
            await asyncio.sleep(0.1)
            for task in tasks:
                if task.done() and task.exception():
                    raise task.exception()
        for _, ws in sockets:
            await ws.close()

    async def _read(self, run_id, ws):
        out = self.frames[run_id]
        async for message in ws:
            out.append((time.time(), orjson.loads(message)))


def attribute(frames):
    """(batch index -> (arrival of its points frame, receipt id), [(batch index, receipt id, arrival, frame) per
    fired alert frame])."""
    points, fired = {}, []
    batch = receipt = None
    for at, frame in frames:
        if frame["type"] == "points" and frame.get("min_step") is not None:
            batch, receipt = frame["min_step"] // bench.STEPS_PER_BATCH, frame["receipt"]
            points.setdefault(batch, (at, receipt))
        elif frame["type"] == "alert" and frame.get("change") == "fired" and batch is not None:
            fired.append((batch, receipt, at, frame))
    return points, fired


def evaluated_at(console, receipts):
    with console.connect() as conn:
        return dict(conn.execute("SELECT id, extract(epoch FROM evaluated_at)::float FROM ingest_batchreceipt "
                                 "WHERE id = ANY(%s)", (list(receipts),)).fetchall())


def fmt(p):
    return " / ".join("-" if v is None else f"{v * 1000:,.0f} ms" for v in p)


def main(argv=None):
    p = deployment_arguments(__doc__.split("\n")[1], "wl_bench_latency", steps=6000, quick_steps=2000)
    p.add_argument("--rate", type=float, default=50_000, help="points/s, all runs together (default 50,000)")
    p.add_argument("--web", type=int, default=2, help="uvicorn --workers (default 2)")
    p.add_argument("--celery", type=int, default=1, help="celery worker processes (-c, default 1)")
    p.add_argument("--pace-after-ms", type=int, default=1000,
                   help="the console's EVALUATION_PACE_AFTER_MS (default 1000, as deployed; 0: ingest never waits for evaluation)")
    args = p.parse_args(argv)
    if args.quick:
        args.steps = 2000

    t = time.perf_counter()
    runs = make_runs(args)
    batch_points = args.series * bench.STEPS_PER_BATCH
    measured = sum(len(bodies) - 1 for bodies, _ in runs.values()) * batch_points
    interval = batch_points * args.runs / args.rate  # seconds between one run's batches
    print(f"Warning Light alert latency: {args.runs} runs x {args.series} series x {args.steps:,} steps, "
          f"{batch_points:,}-point batches (bodies built in {time.perf_counter() - t:.1f}s); target {args.rate:,.0f} "
          f"points/s in all = one batch per run every {interval * 1000:.0f} ms; uvicorn --workers {args.web}, "
          f"celery -c {args.celery}; ingest paced after {args.pace_after_ms} ms of evaluation lag"
          f"{' (off)' if not args.pace_after_ms else ''}; {bench.code_version()}\n  {machine()}", flush=True)

    with tempfile.TemporaryDirectory(prefix="wl-latency-") as tmp:
        console = Console(args.admin_url, args.db, args.redis_url, Path(tmp), args.pace_after_ms)
        try:
            console.start_web(args.web)
            console.start_workers(args.celery)
            cookie = console.session_cookie()
            for bodies, _ in runs.values():
                post(console.port, console.token, bodies[0])
            console.wait_evaluated(120)
            listener = Listener(console.port, cookie, list(runs))
            listener.start()
            listener.ready.wait(60)
            if listener.error:
                raise RuntimeError(f"websocket: {listener.error!r}")

            t0 = time.time() + 0.2
            senders = {}
            for r, (run_id, (bodies, _)) in enumerate(runs.items()):
                # The runs' due times are spread over one interval, as independent jobs' would be.
                senders[run_id] = Sender(console.port, console.token, bodies, 1, interval, t0 + r * interval / args.runs)
            before = cpu_split(console, args)
            for s in senders.values():
                s.start()
            for s in senders.values():
                s.join()
            sent = max(max(s.answered.values()) for s in senders.values()) - t0
            while_sending = cpu_split(console, args)
            backlog = console.unevaluated()
            drain = console.wait_evaluated(300)
            drained = cpu_split(console, args)
            time.sleep(1.0)  # the last frames on their way
            listener.stop.set()
            listener.join(10)
            lag = console.evaluation_lag()
            print(f"  uvicorn + worker on {console.url.rsplit('/', 1)[-1]}; {console.rules} starter rules", flush=True)
        finally:
            console.stop()

    failures = [f for s in senders.values() for f in s.failures]
    took = [x for s in senders.values() for x in s.took]
    batch_lat, alert_lat, missing_points = [], [], 0
    parts = {"wait": [], "judge": [], "deliver": []}
    injected = seen_injected = 0
    attributed = {run_id: attribute(listener.frames[run_id]) for run_id in senders}
    judged_at = evaluated_at(console, {r for _, fired in attributed.values() for _, r, _, _ in fired})
    for run_id, s in senders.items():
        points, fired = attributed[run_id]
        for b, answered in s.answered.items():
            if b in points:
                batch_lat.append(points[b][0] - answered)
            else:
                missing_points += 1
        for b, receipt, arrived, frame in fired:
            if b not in s.answered:
                continue  # a warm-up batch
            alert_lat.append(arrived - s.answered[b])
            # The change's `at` is when the worker began judging the batch; evaluated_at, when it was done.
            began = datetime.fromisoformat(frame["at"]).timestamp()
            parts["wait"].append(began - s.answered[b])
            parts["judge"].append(judged_at[receipt] - began)
            parts["deliver"].append(arrived - judged_at[receipt])
        nan_steps = runs[run_id][1]
        injected += len(nan_steps)
        seen_injected += len({f["alert"]["step"] for _, _, _, f in fired if f["alert"]["rule"]["name"] == "nonfinite-loss"}
                             & nan_steps)

    print(f"\n  sent {measured:,} points in {sent:.1f}s: {measured / sent:,.0f} points/s achieved "
          f"(target {args.rate:,.0f}); ingest answers p50 / p95 / max {fmt(percentiles(took))}; "
          f"{len(failures)} failures{': ' + failures[0] if failures else ''}")
    print(f"  evaluation: {backlog} batches unevaluated at the last answer, drained {drain:.1f}s later; "
          f"lag (evaluated_at - received_at) p50 / p95 / max {fmt(lag)}")
    busy = {k: while_sending[k] - before[k] for k in before}
    print(f"  CPU while sending ({sent:.1f} s, {os.cpu_count()} CPUs), seconds (share of one CPU): "
          + ", ".join(f"{k} {v:.1f} ({v / sent:.2f})" for k, v in busy.items())
          + f"; a point: web {busy['web'] / measured * 1e6:.2f} µs sent, workers "
          f"{(drained['workers'] - before['workers']) / measured * 1e6:.2f} µs judged (until drained)")
    print(f"  batch evaluated -> its points frame, from its ingest answer: p50 / p95 / max {fmt(percentiles(batch_lat))} "
          f"over {len(batch_lat)} batches ({missing_points} frames missing)")
    p50, p95, worst = percentiles(alert_lat)
    print(f"  ALERT LATENCY (ingest answer -> 'fired' frame on the run's websocket): p50 / p95 / max "
          f"{fmt((p50, p95, worst))} over {len(alert_lat)} alerts; injected NaN losses alerted: {seen_injected} of {injected}")
    print(f"    of which: waiting for the worker (queue, earlier batches) {fmt(percentiles(parts['wait']))}; judging "
          f"the batch {fmt(percentiles(parts['judge']))}; commit to frame (channel layer, consumer, websocket) "
          f"{fmt(percentiles(parts['deliver']))}")
    verdict = "MET" if p95 is not None and p95 <= TARGET_P95 and seen_injected == injected else "MISSED"
    lag_verdict = "MET" if lag[1] is not None and lag[1] <= TARGET_LAG_P95 else "MISSED"
    print(f"  target alert latency p95 <= {TARGET_P95:.0f} s at {args.rate:,.0f} points/s: {verdict}; evaluation lag "
          f"p95 <= {TARGET_LAG_P95:.0f} s: {lag_verdict} (achieved {measured / sent:,.0f} points/s)\n  after: {machine()}")
    return 0 if verdict == lag_verdict == "MET" else 1


if __name__ == "__main__":
    sys.exit(main())
