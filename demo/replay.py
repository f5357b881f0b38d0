#!/usr/bin/env python3
"""Replay an NDJSON run file into a console through the HTTP API, as a training job would.

Standard library only. Each request is a JSON batch of the contract with a
deterministic batch_id, so replaying the same file twice stores it once.

    python demo/replay.py --url http://127.0.0.1:8000 --token wl_… FILE.ndjson.gz [--run-id ID]
"""
import argparse
import gzip
import json
import sys
import time
import urllib.error
import urllib.request


def batches(path, size, run_id=None):
    opener = gzip.open if path.endswith(".gz") else open
    run, phases, points = None, [], []
    with opener(path, "rt") as fh:
        for line in fh:
            if not line.strip():
                continue
            item = json.loads(line)
            kind = item.pop("type")
            if kind == "run":
                run = item
                if run_id:
                    run["id"] = run_id
                continue
            item.pop("run", None)
            if kind == "phase":
                phases.append(item)
            elif kind == "point":
                points.append(item)
                if len(points) >= size:
                    yield run, phases, points
                    phases, points = [], []
    if points or phases:
        yield run, phases, points


def post(url, token, body):
    request = urllib.request.Request(
        url + "/api/v1/ingest",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.load(response)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--run-id")
    parser.add_argument("--batch", type=int, default=1000, help="points per request")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between requests (to watch it live)")
    args = parser.parse_args()
    sent = 0
    for index, (run, phases, points) in enumerate(batches(args.file, args.batch, args.run_id)):
        body = {"batch_id": f"replay:{index}", "run": run, "phases": phases, "points": points}
        try:
            status, answer = post(args.url.rstrip("/"), args.token, body)
        except urllib.error.HTTPError as exc:
            sys.exit(f"batch {index} refused: HTTP {exc.code} {exc.read().decode()[:500]}")
        sent += answer["accepted"]["points"]
        if args.pause:
            time.sleep(args.pause)
    print(f"replayed {args.file}: {sent} points into run {run['id']}", file=sys.stderr)


if __name__ == "__main__":
    main()
