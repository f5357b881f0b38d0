#!/usr/bin/env python
"""JSONL export benchmark: a project's export through uvicorn, its server's peak memory as the project grows.

    .venv/bin/python benchmarks/export.py                          # 20,000 then 200,000 events (+ alerts, decisions)
    .venv/bin/python benchmarks/export.py --sizes 5000,50000       # quick check

In the database `wl_bench_export` (dropped and made again): one project, 20 runs, and for each size N, N events
(one in 50 with a NaN magnitude), N/10 alerts (each with its "fired" change) and N/100 decision-log entries,
written with bulk inserts. One uvicorn (the console's ASGI server, as bin/run serves it) answers
`GET /api/v1/projects/bench-export/export/` with the project's token; the body is read in 64 KiB pieces.
Printed per size: lines and bytes, seconds to the first byte and to the last, and the uvicorn process's peak
resident memory (VmHWM) after the export. The export reads rows in chunks (exports/jsonl.py) and hands
lines to uvicorn in batches (opsconsole/rest.py), so the peak should not grow with N; an export that read
the project whole would add several hundred MB at 200,000 events.
"""
from __future__ import annotations

import argparse
import http.client
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/, where ingest.py would shadow the `ingest` app.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import ingest as bench  # noqa: E402
from benchmarks.support import Server  # noqa: E402

SLUG = "bench-export"
RUNS = 20


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def add_rows(project, runs, start: int, count: int):
    """`count` more events, count/10 alerts and count/100 decisions, spread over the runs."""
    import math

    from django.utils import timezone

    from alerts.models import Alert, AlertChange, Rule
    from ingest.models import BatchReceipt, Event
    from reviews.models import LogEntry

    now = timezone.now()
    rule, _ = Rule.objects.get_or_create(project=project, name="grad-nonfinite", defaults=dict(
        kind="nonfinite", owner="Bench on-call", scope={"metrics": ["grad_norm"]}, persistence={"points": 1},
        diagnostic_url="https://runbooks.example/grad", permitted_response="notify"))
    receipts = {run.pk: BatchReceipt.objects.create(run=run, received_at=now) for run in runs}
    batch = 5000
    for first in range(start, start + count, batch):
        rows = []
        for i in range(first, min(first + batch, start + count)):
            run = runs[i % RUNS]
            rows.append(Event(run=run, attempt=1, step=i, component=f"layers.{i % 24}", condition="exploding",
                              magnitude=None if i % 50 == 0 else 1.5 + i % 7, time=1_764_000_000 + i,
                              detail={"grad_norm": 12.5}, receipt=receipts[run.pk]))
        Event.objects.bulk_create(rows)
    alerts = Alert.objects.bulk_create([
        Alert(rule=rule, run=runs[i % RUNS], component=f"layers.{i}", metric="grad_norm", first_step=i, last_step=i + 1,
              fired_step=i + 1, magnitude=math.inf if i % 9 == 0 else 3.0, magnitude_unit="non-finite points in a row",
              state="resolved", fired_at=now, resolved_at=now)
        for i in range(start, start + count // 10)])
    AlertChange.objects.bulk_create([AlertChange(alert=a, kind="fired", step=a.first_step, at=now) for a in alerts])
    LogEntry.objects.bulk_create([
        LogEntry(project=project, run=runs[i % RUNS], observation=f"note {i}: loss flat since the restart",
                 explanations=["data loader stalled", "lr too low"], owner="Bench on-call", at=now, step=i)
        for i in range(start, start + count // 100)])


def export(port: int, token: str, pid: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    conn.request("GET", f"/api/v1/projects/{SLUG}/export/?format=jsonl", headers={"Authorization": f"Bearer {token}"})
    answer = conn.getresponse()
    assert answer.status == 200, answer.read()[:500]
    first = answer.read(1)
    first_byte = time.perf_counter() - started
    size, lines = len(first), first.count(b"\n")
    while piece := answer.read(65536):
        size += len(piece)
        lines += piece.count(b"\n")
    conn.close()
    return {"lines": lines, "bytes": size, "first_byte_s": first_byte, "total_s": time.perf_counter() - started,
            "peak_mib": peak_kib(pid) / 1024}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="20000,200000", help="events in the project at each export, growing (default 20000,200000)")
    p.add_argument("--db", default="wl_bench_export")
    p.add_argument("--admin-url", default=os.environ.get("BENCH_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    url = bench.db_url(args.admin_url, args.db)
    bench.recreate_database(args.admin_url, args.db)
    env = bench.service_env(url, args.redis_url)
    bench.manage(env, "migrate", "--noinput", "-v", "0")
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "opsconsole.settings"
    import django

    django.setup()
    from ingest.models import Project, ProjectToken, Run

    project = Project.objects.create(slug=SLUG)
    token = ProjectToken.issue(project)[1]
    runs = [Run.objects.create(project=project, run_id=f"bench-export-{i}") for i in range(RUNS)]

    print(f"JSONL export of one project through uvicorn; {bench.pg_settings(args.admin_url)}; {bench.code_version()}")
    server = Server(env, Path(tempfile.mkdtemp(prefix="wl-bench-export-")) / "uvicorn.log")
    try:
        server.wait_ready()
        have = 0
        for size in sizes:
            add_rows(project, runs, have, size - have)
            have = size
            figures = export(server.port, token, server.proc.pid)
            print(f"  {size:>9,} events, {size // 10:,} alerts, {size // 100:,} decisions: {figures['lines']:,} lines, "
                  f"{figures['bytes'] / 2**20:.1f} MiB; first byte {figures['first_byte_s']:.2f} s, all {figures['total_s']:.1f} s "
                  f"({figures['lines'] / figures['total_s']:,.0f} lines/s); uvicorn peak RSS {figures['peak_mib']:.0f} MiB")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
