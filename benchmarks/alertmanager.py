#!/usr/bin/env python
"""The Alertmanager webhook at the contract's limit: one notification of N alerts (10,000), firing, repeated, resolved.

    .venv/bin/python benchmarks/alertmanager.py                                  # embedded SQLite in a temp dir
    .venv/bin/python benchmarks/alertmanager.py --database-url postgres://…/db   # an empty database, migrated here
        [--redis-url redis://127.0.0.1:6379/N]                                   # with a Celery worker, as deployed

A fresh console (`manage.py migrate`, `issue_token` → the starter pack), served by
uvicorn (one worker, DEBUG=0). Without --redis-url evaluation runs in the web
process after commit, so a request's time includes judging it; with it, a
Celery worker (`-c 1`) judges it after the answer (Redis db N is flushed). One
run, N alerts on N components (`instance` labels), so evaluation opens N alerts:
the worst case. Prints each request's seconds, when its alerts were all judged
(read back through the API), and that one more alert than the limit is a 413.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent / "faults"))

from run import PYTHON, ROOT, Client, manage, service_env  # noqa: E402  (benchmarks/faults/run.py)
from benchmarks.support import Server  # noqa: E402  (run put the repository root on sys.path)

RUN = "bench-am-run"


def notification(n: int, status: str) -> bytes:
    alerts = [
        {"status": status, "labels": {"alertname": "NodeDown", "run": RUN, "instance": f"node{i}:9100", "condition": "dead"},
         "annotations": {"summary": f"node{i} is down"}, "startsAt": "2026-11-29T10:00:00Z",
         "endsAt": "2026-11-29T10:05:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
         "generatorURL": "http://prometheus:9090/graph", "fingerprint": f"{i:016x}"}
        for i in range(n)
    ]
    return orjson.dumps({"version": "4", "status": status, "receiver": "warning-light", "alerts": alerts})


def judged(client: Client, expect: dict, timeout=600.0) -> float:
    """Seconds until the run's alerts read back as `expect` ({state: count})."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        states, offset, code = [], 0, 200
        while code == 200:  # a page at a time (the API's largest page is 500)
            code, answer = client.request("GET", f"/api/v1/alerts/?run={RUN}&limit=500&offset={offset}")
            page = orjson.loads(answer)["results"] if code == 200 else []
            states += [a["state"] for a in page]
            offset += len(page)
            if not page:
                break
        if all(states.count(state) == count for state, count in expect.items()):
            return time.perf_counter() - start
        time.sleep(1.0)  # reading 10,000 alerts back is itself work for the server
    raise RuntimeError(f"alerts not judged within {timeout:.0f}s")


def start_worker(env: dict, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([PYTHON, "-m", "celery", "-A", "opsconsole", "worker", "-c", "1", "-l", "warning"], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alerts", type=int, default=10_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--redis-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        var = Path(tmp)
        env = service_env(args.database_url or f"sqlite:///{var / 'bench.sqlite3'}", var)
        manage(env, "migrate", "--no-input")
        token = manage(env, "issue_token", "bench-am", "--owner", "Bench <#bench>").strip()
        worker = None
        if args.redis_url:
            import redis

            redis.Redis.from_url(args.redis_url).flushdb()
            env["REDIS_URL"] = args.redis_url
            worker = start_worker(env, var / "worker.log")
        server = Server(env, var / "server.log", workers=1)
        try:
            server.wait_ready()
            client = Client(server.port, token)
            headers = {"Content-Type": "application/json"}
            where = "PostgreSQL" if args.database_url else "SQLite"
            print(f"{args.alerts:,} alerts in one notification, {where}, "
                  f"{'a Celery worker' if worker else 'evaluation in the web process'}")
            steps = (("firing", "firing", {"firing": args.alerts}), ("repeat", "firing", {"firing": args.alerts}),
                     ("resolved", "resolved", {"resolved": args.alerts}))
            for label, status, expect in steps:
                body = notification(args.alerts, status)
                start = time.perf_counter()
                code, answer = client.request("POST", "/api/v1/alertmanager", body, headers)
                seconds = time.perf_counter() - start
                assert code == 202, (code, answer[:300])
                done = seconds + judged(client, expect)
                print(f"  {label:<9} {len(body) / 1e6:5.2f} MB  answered in {seconds:6.2f} s, all alerts {status} after "
                      f"{done:6.2f} s  {orjson.loads(answer)['accepted']}")
            code, answer = client.request("POST", "/api/v1/alertmanager", notification(args.alerts + 1, "firing"), headers)
            print(f"  {args.alerts + 1:,} alerts: HTTP {code} {orjson.loads(answer)['errors'][0]['message']}")
            code, run = client.request("GET", f"/api/v1/runs/{RUN}/")
            print(f"  run status after: {orjson.loads(run)['status']}")
            client.close()
        finally:
            server.stop()
            if worker is not None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=30)


if __name__ == "__main__":
    main()
