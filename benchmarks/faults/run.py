#!/usr/bin/env python
"""Fault benchmark: labelled runs replayed through the HTTP API into a fresh console, scored.

    .venv/bin/python benchmarks/faults/run.py                          # every labelled run, both corpora
    .venv/bin/python benchmarks/faults/run.py --split tune --verbose   # tuning runs, one line per run
    .venv/bin/python benchmarks/faults/run.py --rules my-rules.yaml    # plus rules of your own (project `faults`)
    .venv/bin/python benchmarks/faults/run.py --only pythia-410m --json out.json
    .venv/bin/python benchmarks/faults/run.py --no-pack --rules my-rules.yaml  # only your rules

What it does:

1. reads the labels of the generated corpus (`benchmarks/faults/corpus/labels.json`, skipped with
   a note while it does not exist) and of the real runs (`data/real-runs/labels.json`; their
   split is fixed here: tune = pythia-160m-seed4, pythia-410m-seed4, heldout = the others, and
   their incidents are run-level), or instead the labels files given with --labels, and selects
   runs with --corpus, --split and --only;
2. makes a fresh console: a new SQLite file in a temporary folder (or, with --database-url
   ADMIN_URL, a PostgreSQL database `wl_faults_bench` dropped and created on that server and
   dropped again at the end), `manage.py migrate`, `manage.py issue_token faults --owner
   "Bench On-call <oncall@example.org>"` (which creates the project and whatever rules a new
   project gets: the starter pack), disables those rules with --no-pack, then runs
   `manage.py load_rules FILE` when --rules is given (the rules must name `project: faults`; a
   rule of the same name as one of the pack's replaces it), and lists the project's rules;
3. starts `uvicorn opsconsole.asgi:application` (one process; --workers W for more) on a free
   port of 127.0.0.1 with DEBUG=0 and no REDIS_URL, so Celery runs eagerly: a batch's
   evaluation runs in the web process after its transaction commits and is done when the POST
   answers; the server is stopped at the end whatever happens;
4. replays each run's file (gzipped contract-v1 NDJSON) as it is, line for line in arrival
   order, through `POST /api/v1/ingest` (application/x-ndjson), cut into consecutive batches
   of at most --batch-lines lines (default 2,000; the run line only in the first), each with
   `X-Batch-Id: <run id>:<batch number>`; runs go in parallel over --clients threads
   (default 2; largest files first), the batches of one run in order on one keep-alive
   connection. Every answer must be 202 with every line accepted, otherwise the error body is
   printed and the benchmark stops (exit 1);
5. after a run's last batch, reads `GET /api/v1/alerts/?run=<run id>` for it and
   `GET /api/v1/incidents/?run=<run id>` (its incidents when that answers 200; on 404, a console
   without the endpoint, the run's alerts are grouped client-side by `score.group_alerts`, the
   stand-in: alerts within 5 steps of each other, origin weights > activations > gradients >
   loss, then earliest; any other status stops the benchmark), and runs the phase-blind baseline
   (`baseline.py`, rolling EMA z-score, alpha 0.97, |z| > 3) on the same lines in the same order,
   offline, in the same client thread;
6. scores both with `score.py`, at the alert level and at the incident level (the baseline's
   incidents always from the stand-in), and prints, per detector and level, one table per split
   (tune, heldout, all) with the targets beside the figures (lasting faults still open at the end
   included) and which source the incidents came from; per detector, the real runs one by one
   (`score.real_runs_check`): for each labelled fault (the failed restores of pythia-410m-seed3
   and -seed4) whether it was alerted within 20 steps and with what delay, and whether an incident
   of it is still open or needs review after the run's last batch (step 143,000); for each benign
   real run, its pages (incidents), or none; per-run lines with --verbose, the request latencies
   (which include evaluation), any errors in the server log, and the wall time; --json OUT writes
   all of it (two such files are compared fault by fault with `compare.py`).
"""
from __future__ import annotations

import argparse
import http.client
import json
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
from urllib.parse import quote, urlparse, urlunparse

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))  # for benchmarks.support

import baseline  # noqa: E402
import score  # noqa: E402
from benchmarks.support import Server  # noqa: E402

PYTHON = sys.executable
PROJECT = "faults"
OWNER = "Bench On-call <oncall@example.org>"
PG_DATABASE = "wl_faults_bench"
GENERATED_LABELS = HERE / "corpus" / "labels.json"
REAL_LABELS = ROOT / "data" / "real-runs" / "labels.json"
REAL_TUNE = {"pythia-160m-seed4", "pythia-410m-seed4"}
RESTORE_CHECK = ("pythia-410m-seed4", 122002, 20)  # run, incident start, steps (the --json's `restore_check`)
MAX_BODY = 3_500_000  # stay under the contract's 4 MiB per body even with long lines
SPLITS = ("tune", "heldout", "all")


# --------------------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------------------

def _label_items(document: dict):
    runs = document.get("runs", document)
    if isinstance(runs, dict):
        return list(runs.items())
    return [(r.get("run") or r.get("id") or Path(r["file"]).name.split(".")[0], r) for r in runs]


def _incident(inc: dict, real: bool) -> dict:
    return {
        "kind": inc["kind"],
        "start_step": int(inc["start_step"]),
        "end_step": None if inc.get("end_step") is None else int(inc["end_step"]),
        "component": "" if real else (inc.get("component") or ""),
        "metrics": inc.get("metrics") or [],
    }


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def load_labels(corpus: str, extra: list[Path] = ()) -> tuple[list[dict], list[str]]:
    """Run specs of the selected corpora (or of the `extra` labels files instead), and notes about what was skipped."""
    specs, notes = [], []
    sources = [(p.resolve().parent.name, p.resolve(), p.resolve() == REAL_LABELS) for p in extra]
    if not extra and corpus in ("generated", "all"):
        if GENERATED_LABELS.exists():
            sources.append(("generated", GENERATED_LABELS, False))
        elif corpus == "generated":
            raise SystemExit(f"{GENERATED_LABELS.relative_to(ROOT)} does not exist (yet): generate the corpus first")
        else:
            notes.append(f"generated corpus skipped: {GENERATED_LABELS.relative_to(ROOT)} does not exist yet")
    if corpus in ("real", "all") and not extra:
        sources.append(("real", REAL_LABELS, True))
    for name, path, real in sources:
        document = json.loads(path.read_text())
        for key, label in _label_items(document):
            split = ("tune" if key in REAL_TUNE else "heldout") if real else label.get("split")
            if split not in ("tune", "heldout"):
                raise SystemExit(f"{_rel(path)}: run {key}: split must be tune or heldout, got {split!r}")
            specs.append({
                "corpus": name,
                "key": key,
                "file": (path.parent / label["file"]).resolve(),
                "split": split,
                "incidents": [_incident(i, real) for i in label.get("incidents", [])],
                "benign_events": label.get("benign_events", []),
            })
    return specs, notes


def select(specs: list[dict], split: str, only: list[str]) -> list[dict]:
    chosen = [s for s in specs if split == "all" or s["split"] == split]
    if only:
        chosen = [s for s in chosen if any(o in s["key"] or o in s["file"].name for o in only)]
    return chosen


# --------------------------------------------------------------------------------------
# The console: database, management commands, server
# --------------------------------------------------------------------------------------

def service_env(database_url: str, var_dir: Path) -> dict:
    env = dict(os.environ)
    for name in ("DJANGO_SETTINGS_MODULE", "REDIS_URL"):
        env.pop(name, None)
    env.update(
        DATABASE_URL=database_url,
        DEBUG="0",
        SECRET_KEY="fault-benchmark-secret-key-not-for-production-" + "x" * 20,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        WL_VAR_DIR=str(var_dir),
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    return env


def manage(env: dict, *args: str) -> str:
    res = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res.stdout


LIST_RULES = """
from alerts.models import Rule
for r in Rule.objects.filter(project__slug=%r).order_by("name"):
    print("\\t".join([r.name, r.kind, "on" if r.enabled else "off", r.permitted_response]))
"""


DISABLE_RULES = """
from alerts.models import Rule
from alerts.rules import save_rule
for r in Rule.objects.filter(project__slug=%r, enabled=True):
    r.enabled = False
    save_rule(r, source="benchmarks/faults --no-pack")
"""


def list_rules(env: dict) -> list[dict]:
    out = manage(env, "shell", "-c", LIST_RULES % PROJECT)
    rules = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 4:
            rules.append({"name": parts[0], "kind": parts[1], "enabled": parts[2] == "on", "permitted_response": parts[3]})
    return rules


class Postgres:
    """`wl_faults_bench` on the server of an admin URL: dropped and created, dropped at the end."""

    def __init__(self, admin_url: str):
        import psycopg

        self.psycopg = psycopg
        self.admin_url = admin_url
        self.url = urlunparse(urlparse(admin_url)._replace(path="/" + PG_DATABASE))
        # One benchmark at a time per server: a second would drop the first one's database.
        self.lock = psycopg.connect(admin_url, autocommit=True)
        if not self.lock.execute("SELECT pg_try_advisory_lock(hashtext('warning-light benchmarks/faults'))").fetchone()[0]:
            self.lock.close()
            raise SystemExit("another benchmarks/faults/run.py holds this PostgreSQL server's benchmark lock; wait for it")

    def create(self):
        with self.psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')

    def drop(self):
        try:
            with self.psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
        finally:
            self.lock.close()


def log_problems(text: str) -> list[str]:
    """Tracebacks and ERROR/CRITICAL lines of the server log, one entry each (first lines only)."""
    problems, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Traceback"):
            j = i + 1
            while j < len(lines) and (lines[j].startswith(" ") or lines[j].startswith("\t")):
                j += 1
            last = lines[j] if j < len(lines) else lines[j - 1]
            problems.append(f"{last.strip()} (traceback, {j - i} lines)")
            i = j + 1
            continue
        if "ERROR" in line or "CRITICAL" in line:
            problems.append(line.strip()[:300])
        i += 1
    return problems


# --------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------

class Failure(Exception):
    pass


def batches_of(lines: list[bytes], size: int) -> list[bytes]:
    """Consecutive slices of at most `size` lines (and MAX_BODY bytes), joined as NDJSON bodies."""
    bodies, current, nbytes = [], [], 0
    for line in lines:
        if current and (len(current) >= size or nbytes + len(line) + 1 > MAX_BODY):
            bodies.append(b"\n".join(current) + b"\n")
            current, nbytes = [], 0
        current.append(line)
        nbytes += len(line) + 1
    if current:
        bodies.append(b"\n".join(current) + b"\n")
    return bodies


class Client:
    """One keep-alive connection to the server."""

    def __init__(self, port: int, token: str):
        self.port = port
        self.auth = f"Bearer {token}"
        self.conn = None

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        hdrs = {"Authorization": self.auth, **(headers or {})}
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            try:
                self.conn.request(method, path, body=body, headers=hdrs)
                resp = self.conn.getresponse()
                payload = resp.read()
                if resp.will_close:
                    self.close()
                return resp.status, payload
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                # A keep-alive connection the server closed between requests: reconnect once.
                # (A retried POST is safe: the batch id makes a second delivery a duplicate.)
                self.close()
                if attempt == 2:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def replay_run(client: Client, spec: dict, batch_lines: int, stop: threading.Event) -> dict:
    t0 = time.perf_counter()
    raw = baseline.read_ndjson(spec["file"])
    parsed = [baseline.parse_line(line) for line in raw]
    first = parsed[0]
    run_id = first["id"] if first.get("type") == "run" else first.get("run")
    steps = [p["step"] for p in parsed if "step" in p]
    last_step = max(steps) if steps else 0
    bodies = batches_of(raw, batch_lines)
    read_s = time.perf_counter() - t0
    del raw
    latencies = []
    offset = 0
    for b, body in enumerate(bodies):
        if stop.is_set():
            raise Failure("stopped: another run failed")
        nlines = body.count(b"\n")
        expected = sum(1 for p in parsed[offset:offset + nlines] if p.get("type") != "run")
        offset += nlines
        t = time.perf_counter()
        status, payload = client.request("POST", "/api/v1/ingest", body, {
            "Content-Type": "application/x-ndjson", "X-Batch-Id": f"{run_id}:{b:06d}"})
        latencies.append(time.perf_counter() - t)
        if status != 202:
            raise Failure(f"{run_id}: batch {b} (lines {offset - nlines + 1}-{offset} of {spec['file'].name}) answered "
                          f"{status}:\n{payload.decode(errors='replace')[:4000]}")
        accepted = json.loads(payload)["accepted"]
        got = sum(accepted.get(k, 0) for k in ("points", "events", "phases"))
        if got != expected:
            raise Failure(f"{run_id}: batch {b}: 202 but {got} of {expected} lines accepted: {payload[:500]!r}")
    send_s = time.perf_counter() - t0 - read_s
    status, alerts = read_pages(client, f"/api/v1/alerts/?run={quote(run_id, safe='')}")
    if status != 200:
        raise Failure(f"{run_id}: GET /api/v1/alerts/ answered {status}:\n{alerts.decode(errors='replace')[:4000]}")
    incidents = read_incidents(client, run_id)
    t = time.perf_counter()
    base_alerts = baseline.detect_lines(parsed, run=run_id)
    base_s = time.perf_counter() - t
    return {
        "run": run_id, "lines": len(parsed), "batches": len(bodies), "last_step": last_step,
        "latencies": latencies, "read_s": read_s, "send_s": send_s, "baseline_s": base_s,
        "alerts": alerts, "baseline_alerts": base_alerts, "incidents": incidents,
    }


def read_incidents(client: Client, run_id: str):
    """The console's incidents of a run (`GET /api/v1/incidents/?run=`), or None when the console has no
    such endpoint (404): the caller then groups the alerts with the client-side stand-in."""
    status, incidents = read_pages(client, f"/api/v1/incidents/?run={quote(run_id, safe='')}")
    if status == 404:
        return None
    if status != 200:
        raise Failure(f"{run_id}: GET /api/v1/incidents/ answered {status}:\n{incidents.decode(errors='replace')[:4000]}")
    return incidents


PAGE = 500  # the API's largest page (opsconsole/pagination.py)


def read_pages(client: Client, path: str):
    """(200, every item of a paged list) read a page at a time, or (status, body) of the first answer not 200.

    A bare list (a console from before the API paged its lists) is taken whole."""
    items, offset = [], 0
    while True:
        status, payload = client.request("GET", f"{path}&limit={PAGE}&offset={offset}")
        if status != 200:
            return status, payload
        page = json.loads(payload)
        if isinstance(page, list):
            return status, page
        items += page["results"]
        if not page.get("next") or not page["results"]:
            return status, items
        offset += len(page["results"])


STANDIN = (f"client-side stand-in: alerts within {score.STANDIN_GAP} steps of each other, origin weights > activations > "
           "gradients > loss > others, then earliest")
CONSOLE_INCIDENTS = "console: GET /api/v1/incidents/"


def incidents_of(results: dict) -> tuple[dict, str]:
    """Per run: the console's incidents where the endpoint answered 200, else the stand-in's; and which source was used."""
    out, from_console = {}, 0
    for r in results.values():
        if r["incidents"] is not None:
            out[r["run"]] = r["incidents"]
            from_console += 1
        else:
            out[r["run"]] = score.group_alerts(r["run"], r["alerts"])
    if from_console == len(results):
        source = CONSOLE_INCIDENTS
    elif from_console == 0:
        source = STANDIN + f" (GET /api/v1/incidents/ answered 404 for every run)"
    else:
        source = f"mixed: {CONSOLE_INCIDENTS} for {from_console} runs, {STANDIN} for {len(results) - from_console}"
    return out, source


def replay_all(port: int, token: str, specs: list[dict], clients: int, batch_lines: int) -> dict:
    work = queue.SimpleQueue()
    # Largest files first: the slowest run starts at once instead of last.
    for spec in sorted(specs, key=lambda s: -s["file"].stat().st_size):
        work.put(spec)
    results, errors = {}, []
    lock = threading.Lock()
    stop = threading.Event()
    started = time.perf_counter()

    def worker():
        client = Client(port, token)
        try:
            while not stop.is_set():
                try:
                    spec = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    res = replay_run(client, spec, batch_lines, stop)
                except Exception as exc:  # noqa: BLE001
                    with lock:
                        if not isinstance(exc, Failure) or not str(exc).startswith("stopped:"):
                            errors.append(f"{type(exc).__name__}: {exc}" if not isinstance(exc, Failure) else str(exc))
                    stop.set()
                    return
                with lock:
                    results[spec["key"]] = res
                    lat = res["latencies"]
                    print(f"  {res['run']}: {res['lines']:,} lines in {res['batches']} batches, {res['send_s']:.1f}s "
                          f"(request p50 {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms); "
                          f"{len(res['alerts'])} console alerts, {len(res['baseline_alerts'])} baseline alerts "
                          f"[{len(results)}/{len(specs)}, {time.perf_counter() - started:.0f}s]", flush=True)
        finally:
            client.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, clients))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise Failure("\n".join(errors))
    return results


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

def code_version() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "ingest", "alerts", "opsconsole"], cwd=ROOT,
                               capture_output=True, text=True).stdout.splitlines()
    except OSError:
        return "git ?"
    dirty = [line[3:] for line in dirty if line.strip()]
    return f"git {head or '?'} ({'uncommitted changes in ' + ', '.join(dirty) if dirty else 'clean'})"


def latency_summary(results: dict) -> dict:
    every = [(lat, r["run"], b) for r in results.values() for b, lat in enumerate(r["latencies"])]
    if not every:
        return {}
    values = [v for v, _, _ in every]
    slowest = sorted(every, reverse=True)[:5]
    # Does a batch get slower as its run grows? First vs last ten batches of the longest run.
    longest = max(results.values(), key=lambda r: r["batches"])
    lat = longest["latencies"]
    return {
        "batches": len(values),
        "p50_ms": statistics.median(values) * 1000,
        "p95_ms": score.nearest_rank(values, 95) * 1000,
        "max_ms": max(values) * 1000,
        "slowest": [{"run": r, "batch": b, "ms": v * 1000} for v, r, b in slowest],
        "longest_run": longest["run"],
        "longest_first10_ms": statistics.mean(lat[:10]) * 1000,
        "longest_last10_ms": statistics.mean(lat[-10:]) * 1000,
    }


def build_runs(specs: list[dict], results: dict) -> list[dict]:
    return [{"run": results[s["key"]]["run"], "key": s["key"], "corpus": s["corpus"], "split": s["split"],
             "last_step": results[s["key"]]["last_step"], "incidents": s["incidents"]} for s in specs]


def evaluate(runs: list[dict], alerts_by_run: dict) -> dict:
    out = {}
    for split in SPLITS:
        chosen = [r for r in runs if split == "all" or r["split"] == split]
        if chosen:
            out[split] = score.score(chosen, alerts_by_run)
    return out


def evaluate_incidents(runs: list[dict], incidents_by_run: dict, alerts_by_run: dict) -> dict:
    out = {}
    for split in SPLITS:
        chosen = [r for r in runs if split == "all" or r["split"] == split]
        if chosen:
            out[split] = score.score_incidents(chosen, incidents_by_run, alerts_by_run)
    return out


def print_incidents(name: str, figures: dict, source: str, verbose: bool, real: dict | None = None):
    print(f"\n{name}, incident level: incidents from the {source}")
    for split, f in figures.items():
        print()
        print(score.format_incident_table(f, f"{name}, incidents, {split}", "console" if source == CONSOLE_INCIDENTS else "stand-in"))
    if real is not None and (real["faults"] or real["benign"]):
        print()
        print(score.format_real_runs(real, name))
    if verbose and "all" in figures:
        print(f"\n{name}, incidents per run:")
        for m in figures["all"]["per_run"]:
            print("  " + score.format_incident_run_line(m))


def real_runs(runs: list[dict], alerts_by_run: dict, incidents_by_run: dict) -> dict:
    """The real runs replayed, judged one by one (`score.real_runs_check`)."""
    return score.real_runs_check([r for r in runs if r["corpus"] == "real"], alerts_by_run, incidents_by_run)


def restore_check(alerts_by_run: dict, runs: list[dict]):
    run_id, start, within = RESTORE_CHECK
    if not any(r["run"] == run_id for r in runs):
        return None
    hit = score.alerted_within(alerts_by_run.get(run_id, []), start, within)
    return {"run": run_id, "incident_step": start, "within": within, "first_fired_step": hit, "alerted": hit is not None}


def print_detector(name: str, figures: dict, verbose: bool):
    for split, f in figures.items():
        print()
        print(score.format_table(f, f"{name}, {split}"))
    if verbose and "all" in figures:
        print(f"\n{name}, per run:")
        for m in figures["all"]["per_run"]:
            print("  " + score.format_run_line(m))


def _wire(obj):
    """Non-finite floats as the contract writes them ("NaN", "Infinity", "-Infinity"), so the file is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {k: _wire(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_wire(v) for v in obj]
    return obj


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", choices=("generated", "real", "all"), default="all",
                   help="which labelled corpus to replay (default all: the generated one, when it exists, and the real runs)")
    p.add_argument("--labels", action="append", default=[], type=Path, metavar="LABELS_JSON",
                   help="replay the runs of this labels file (the generated corpus' shape) instead of the corpora (repeatable)")
    p.add_argument("--split", choices=("tune", "heldout", "all"), default="all", help="which runs to replay (default all)")
    p.add_argument("--only", action="append", default=[], metavar="SUBSTRING",
                   help="only runs whose id or file name contains this (repeatable)")
    p.add_argument("--rules", type=Path, help="a rules YAML (`project: faults`) loaded with manage.py load_rules")
    p.add_argument("--no-pack", action="store_true",
                   help="disable the rules a new project starts with (the starter pack) before --rules is applied")
    p.add_argument("--database-url", metavar="ADMIN_URL",
                   help=f"use PostgreSQL: a database `{PG_DATABASE}` is created on this URL's server and dropped afterwards")
    p.add_argument("--clients", type=int, default=2, help="runs replayed in parallel (default 2)")
    p.add_argument("--workers", type=int, default=1, help="uvicorn --workers (default 1)")
    p.add_argument("--batch-lines", type=int, default=2000, help="NDJSON lines per request (default 2,000)")
    p.add_argument("--verbose", action="store_true", help="per-run lines: alerts true/false, first fired step, delays")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every figure to this JSON file")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (SQLite file, server log) and print its path")
    args = p.parse_args(argv)
    if not 1 <= args.batch_lines <= 10_000:
        p.error("--batch-lines must be between 1 and 10,000 (the contract's limit per request)")
    return args


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    wall0 = time.perf_counter()
    specs, notes = load_labels(args.corpus, args.labels)
    specs = select(specs, args.split, args.only)
    for note in notes:
        print(f"note: {note}")
    if not specs:
        print("no labelled run selected")
        return 1
    missing = [str(s["file"]) for s in specs if not s["file"].exists()]
    if missing:
        print("labelled files missing:\n  " + "\n  ".join(missing))
        return 1
    by_corpus = {c: sum(1 for s in specs if s["corpus"] == c) for c in sorted({s["corpus"] for s in specs})}
    size = sum(s["file"].stat().st_size for s in specs)
    print(f"Warning Light fault benchmark: {len(specs)} runs ({', '.join(f'{n} {c}' for c, n in by_corpus.items())}; "
          f"{sum(1 for s in specs if s['split'] == 'tune')} tune, {sum(1 for s in specs if s['split'] == 'heldout')} heldout), "
          f"{size / 1048576:.1f} MiB gzipped")
    version = code_version()
    print(f"  {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; application code {version}", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="wl-faults-"))
    pg = Postgres(args.database_url) if args.database_url else None
    server = None
    timings = {}
    problems: list[str] = []
    try:
        t = time.perf_counter()
        if pg:
            pg.create()
            database_url = pg.url
        else:
            database_url = f"sqlite:///{tmp / 'faults.sqlite3'}"
        env = service_env(database_url, tmp / "var")
        manage(env, "migrate", "--noinput")
        token = manage(env, "issue_token", PROJECT, "--owner", OWNER).strip().splitlines()[-1].strip()
        if args.no_pack:
            manage(env, "shell", "-c", DISABLE_RULES % PROJECT)
        if args.rules:
            print("  " + manage(env, "load_rules", str(args.rules.resolve())).strip())
        rules = list_rules(env)
        enabled = [r for r in rules if r["enabled"]]
        print(f"  database: {'PostgreSQL ' + PG_DATABASE if pg else 'SQLite ' + str(tmp / 'faults.sqlite3')}; "
              f"project `{PROJECT}` has {len(rules)} rules ({len(enabled)} enabled)"
              + (": " + ", ".join(f"{r['name']} ({r['kind']})" for r in enabled[:20]) if enabled else ""))
        if not enabled:
            print("  WARNING: no enabled rule: the console cannot alert"
                  + ("" if args.no_pack else " (no starter pack? pass --rules FILE)"))
        server = Server(env, tmp / "uvicorn.log", args.workers)
        server.wait_ready()
        timings["setup_s"] = time.perf_counter() - t
        print(f"  console ready in {timings['setup_s']:.1f}s on port {server.port}; replaying with {args.clients} clients, "
              f"batches of {args.batch_lines:,} lines", flush=True)
        t = time.perf_counter()
        results = replay_all(server.port, token, specs, args.clients, args.batch_lines)
        timings["replay_s"] = time.perf_counter() - t
    except Failure as exc:
        print(f"\nFAILED:\n{exc}", file=sys.stderr)
        if server is not None:
            found = log_problems(server.log_text())
            if found:
                print("server log:\n  " + "\n  ".join(found[:20]), file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
            problems = log_problems(server.log_text())
        if pg:
            pg.drop()
        if args.keep:
            print(f"  kept {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)

    runs = build_runs(specs, results)
    console_alerts = {r["run"]: r["alerts"] for r in results.values()}
    base_alerts = {r["run"]: r["baseline_alerts"] for r in results.values()}
    console = evaluate(runs, console_alerts)
    base = evaluate(runs, base_alerts)
    console_check, base_check = restore_check(console_alerts, runs), restore_check(base_alerts, runs)
    console_incidents, incident_source = incidents_of(results)
    base_incidents = {run: score.group_alerts(run, found) for run, found in base_alerts.items()}
    console_inc = evaluate_incidents(runs, console_incidents, console_alerts)
    base_inc = evaluate_incidents(runs, base_incidents, base_alerts)
    console_real, base_real = real_runs(runs, console_alerts, console_incidents), real_runs(runs, base_alerts, base_incidents)

    lines = sum(r["lines"] for r in results.values())
    lat = latency_summary(results)
    print(f"\n## Fault benchmark ({len(runs)} runs, {lines:,} lines; {version})")
    for note in notes:
        print(f"\nnote: {note}")
    print(f"\nincidents: {incident_source}")
    print_detector("console", console, args.verbose)
    print_incidents("console", console_inc, incident_source, args.verbose, console_real)
    print_detector("baseline (phase-blind EMA z-score, |z| > 3)", base, args.verbose)
    print_incidents("baseline (phase-blind EMA z-score, |z| > 3)", base_inc, STANDIN, False, base_real)

    timings["baseline_cpu_s"] = sum(r["baseline_s"] for r in results.values())
    timings["wall_s"] = time.perf_counter() - wall0
    print(f"\nrequests: {lat['batches']} batches, latency (ingest + evaluation) p50 {lat['p50_ms']:.0f} ms, "
          f"p95 {lat['p95_ms']:.0f} ms, max {lat['max_ms']:.0f} ms; slowest: "
          + ", ".join(f"{s['run']}#{s['batch']} {s['ms']:.0f} ms" for s in lat["slowest"][:3]))
    print(f"  {lat['longest_run']}: first 10 batches {lat['longest_first10_ms']:.0f} ms each, "
          f"last 10 {lat['longest_last10_ms']:.0f} ms each")
    print(f"server log: {len(problems)} errors" + (":\n  " + "\n  ".join(problems[:20]) if problems else ""))
    print(f"wall time {timings['wall_s']:.1f}s: setup {timings['setup_s']:.1f}s, replay {timings['replay_s']:.1f}s "
          f"({lines / timings['replay_s']:,.0f} lines/s with {args.clients} clients; the baseline took "
          f"{timings['baseline_cpu_s']:.1f}s of it in the client threads)")

    if args.json:
        document = {
            "code": version, "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "notes": notes, "rules": rules, "timings": timings, "latency": lat,
            "runs": [{**r, "lines": results[r["key"]]["lines"], "batches": results[r["key"]]["batches"],
                      "send_s": results[r["key"]]["send_s"]} for r in runs],
            "server_log_errors": problems,
            "console": console, "baseline": base,
            "incident_source": incident_source,
            "console_incidents": console_inc, "baseline_incidents": base_inc,
            "incidents": {"console": console_incidents},
            "restore_check": {"console": console_check, "baseline": base_check},
            "real_runs": {"console": console_real, "baseline": base_real},
            "alerts": {"console": console_alerts, "baseline": base_alerts},
        }
        args.json.write_text(json.dumps(_wire(document), indent=1, default=str, allow_nan=False))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ninterrupted; server stopped", file=sys.stderr)
        sys.exit(130)
