#!/usr/bin/env python
"""Ingest latency while Redis is down: the first batch after the outage began, then the next ones.

    .venv/bin/python benchmarks/broker_down.py                 # 50 batches of 500 points
    .venv/bin/python benchmarks/broker_down.py --batches 200

The console runs in this process (the real ingest view through Django's test
client, embedded SQLite in a temporary directory) with REDIS_URL pointing at a
port nothing listens on, so the Celery broker, the channel layer and the cache
are all down. Every answer must be 202. It prints the first ingest's latency
(the one that finds Redis down), the median and 95th percentile of the rest,
and how often the broker was tried.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--points", type=int, default=500, help="points per batch")
    args = parser.parse_args()

    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "WL_VAR_DIR": tempfile.mkdtemp(prefix="wl-broker-down-"),
        "REDIS_URL": "redis://127.0.0.1:1/0", "DEBUG": "0", "SECRET_KEY": "benchmark", "ALLOWED_HOSTS": "testserver",
        "LOG_LEVEL": "ERROR",
    })
    os.environ.pop("DATABASE_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import orjson
    from django.core.management import call_command
    from django.test import Client

    from alerts import tasks
    from ingest.models import BatchReceipt, Project, ProjectToken

    call_command("migrate", verbosity=0)
    token = ProjectToken.issue(Project.objects.create(slug="bench", name="Bench"))[1]
    client = Client()
    bodies = [orjson.dumps({"run": {"id": "outage"}, "points": [
        {"step": b * args.points + i, "metric": "loss", "value": 1.0} for i in range(args.points)]}) for b in range(args.batches)]

    warm = client.get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {token}")  # imports and first-request work
    assert warm.status_code == 200, warm.content
    latencies = []
    for body in bodies:
        start = time.perf_counter()
        response = client.post("/api/v1/ingest", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
        latencies.append(time.perf_counter() - start)
        assert response.status_code == 202, response.content

    rest = sorted(latencies[1:])
    p95 = rest[min(len(rest) - 1, int(0.95 * len(rest)))] if rest else float("nan")
    print(f"batches: {args.batches} x {args.points} points, Redis down (broker, channel layer, cache)")
    print(f"first ingest (finds the broker down): {latencies[0] * 1000:.1f} ms")
    print(f"next {len(rest)}: median {statistics.median(rest) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")
    breaker = getattr(tasks, "BROKER", None)  # absent before the breaker existed (for comparisons)
    if breaker is not None:
        print(f"broker tried {breaker.attempts} time(s), skipped {breaker.skipped}")
    print(f"stored, left to the sweep: {BatchReceipt.objects.filter(evaluated_at__isnull=True).count()}")


if __name__ == "__main__":
    main()
