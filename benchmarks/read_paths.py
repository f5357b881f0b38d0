#!/usr/bin/env python
"""Read paths at scale: the pages and list APIs a person opens every day, on 3,000 runs and 100,000 alerts.

    .venv/bin/python benchmarks/read_paths.py                 # builds wl_readpaths_bench afresh, then times
    .venv/bin/python benchmarks/read_paths.py --reuse         # keeps the database when it holds the same seed
    .venv/bin/python benchmarks/read_paths.py --runs 300 --alerts 10000   # a quick look

What it does:

1. builds a fresh PostgreSQL database (`--db`, on the server of `--server`, default the local one) with
   `manage.py migrate`'s schema and seeds it directly with bulk_create (no ingest, no evaluation: the read
   paths are what is measured): two projects, "pretrain" (90 % of the runs and alerts) and "vision", each
   with 12 rules (band, threshold, non-finite, absence; some paging); RUNS runs, each with 20 series
   (four in each of the five layers); ALERTS alerts spread evenly over the runs and over the last 30 days
   (the audit report's default period, so the report covers every alert of its project): 3 % firing, 1 %
   acknowledged, the rest resolved, half of those with a verdict, and 0.5 % of the resolved hard-invariant
   alerts never looked at (they keep their run in "needs review"); every alert's fired row (and its
   acknowledged, verdict and resolved rows), one incident per run holding its alerts. Then ANALYZE.
2. times, in this process through Django's test client (the whole Django stack: middleware, session auth,
   DRF, the view, the template or JSON rendering; DEBUG off; no socket), logged in as a rule admin of both
   projects (not a superuser: the visibility filters run as they do for people): 2 warm-ups, then
   `--repeat` timed requests each; the median and the slowest are printed with the answer's size, its
   query count, and MET/MISSED against the target.

Targets (issue 23): runs list page and `GET /api/v1/runs/` ≤ 300 ms, the inbox (page and API) ≤ 300 ms,
the audit report ≤ 1 s; the fatigue page has no target in the issue, and is held to the audit report's.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROJECTS = (("pretrain", 0.9), ("vision", 0.1))
SERIES = [("system", "gpu_util"), ("system", "step_time"), ("system", "mem_used"), ("system", "tokens_per_s"),
          ("data", "batch_loss_var"), ("data", "tokens"), ("data", "pad_ratio"), ("data", "dup_ratio"),
          ("numerics", "grad_norm"), ("numerics", "weight_norm"), ("numerics", "nonfinite"), ("numerics", "act_max"),
          ("optimization", "loss"), ("optimization", "lr"), ("optimization", "update_ratio"), ("optimization", "adam_v"),
          ("generalization", "val/loss"), ("generalization", "val/acc"), ("generalization", "gap"), ("generalization", "ppl")]
RULES = [("band", "loss", "notify"), ("band", "grad_norm", "review"), ("band", "val/loss", "notify"),
         ("threshold", "step_time", "notify"), ("threshold", "gpu_util", "observe"), ("threshold", "lr", "notify"),
         ("nonfinite", "loss", "stop"), ("nonfinite", "grad_norm", "review"), ("nonfinite", "weight_norm", "notify"),
         ("absence", "loss", "notify"), ("absence", "tokens", "review"), ("absence", "val/loss", "notify")]
PARAMS = {"band": {"direction": "above", "width": 6.0}, "threshold": {"above": 10.0}, "nonfinite": {}, "absence": {"missing_steps": 5}}

TARGETS_MS = {"runs list page": 300, "runs list page, search": 300, "runs list page, last page": 300,
              "runs API": 300, "inbox page": 300, "inbox API": 300, "audit report": 1000, "audit report API": 1000,
              "fatigue page": 1000}


def setup_django(url: str):
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "read-paths-benchmark")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "opsconsole.settings"
    import django

    django.setup()


def fresh_database(server: str, name: str, reuse: bool, seed_note: str) -> bool:
    """True when the database must be seeded (it was made afresh)."""
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and reuse:
            comment = conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                                   [name]).fetchone()[0]
            if comment == seed_note:
                return False
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return True


def seed(n_runs: int, n_alerts: int, rng: random.Random):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from alerts.models import Alert, AlertChange, ChangeKind, Incident, IncidentState, Rule
    from ingest.models import Project, Run, Series
    from opsconsole.models import Membership, Role

    call_command("migrate", verbosity=0)
    now = timezone.now()
    user = get_user_model().objects.create_user("bench", password="bench")
    with transaction.atomic():
        projects, rules = [], {}
        for slug, _share in PROJECTS:
            project = Project.objects.create(slug=slug, owner_name="Bench on-call", owner_contact="#bench")
            Membership.objects.create(user=user, project=project, role=Role.RULE_ADMIN)
            projects.append(project)
            rules[project.pk] = Rule.objects.bulk_create([
                Rule(project=project, name=f"{kind}-{metric.replace('/', '-')}", kind=kind, owner=f"{slug} on-call <#{slug}>",
                     scope={"metrics": [metric]}, persistence={"points": 3, "resolve_points": 10}, params=PARAMS[kind],
                     diagnostic_url=f"https://runbooks.example/{kind}", permitted_response=response)
                for kind, metric, response in RULES])
        runs = []
        for i in range(n_runs):
            project = projects[0] if i < n_runs * PROJECTS[0][1] else projects[1]
            seen = now - timedelta(minutes=i * 14)
            runs.append(Run(project=project, run_id=f"{project.slug}/run-{i:05d}", name=f"{project.slug} sweep {i % 40}",
                            tags={"team": project.slug, "lr": f"{(i % 7) + 1}e-4", "seed": str(i % 5)},
                            status="healthy", last_step=10_000 + i, max_step=10_000 + i, last_seen_at=seen))
        runs = Run.objects.bulk_create(runs, batch_size=2000)
        Run.objects.update(created_at=now - timedelta(days=31))
        Series.objects.bulk_create([Series(run=run, metric=metric, component="", layer=layer, max_step=run.last_step)
                                    for run in runs for layer, metric in SERIES], batch_size=5000)
        incidents = Incident.objects.bulk_create([
            Incident(run=run, first_step=100, severity="notify", state=IncidentState.RESOLVED, opened_at=now - timedelta(days=30))
            for run in runs], batch_size=5000)
        incident_of = {inc.run_id: inc for inc in incidents}
        period = timedelta(days=30).total_seconds()
        alerts = []
        for i in range(n_alerts):
            run = runs[i % n_runs]
            kind, metric, _response = RULES[(i // n_runs) % len(RULES)]
            rule = rules[run.project_id][(i // n_runs) % len(RULES)]
            fired = now - timedelta(seconds=period * (1 - (i + 0.5) / n_alerts))
            roll = rng.random()
            state = "firing" if roll < 0.03 else "acknowledged" if roll < 0.04 else "resolved"
            resolved = state == "resolved"
            unlooked = resolved and kind in ("nonfinite", "absence") and rng.random() < 0.005
            alerts.append(Alert(
                rule=rule, run=run, component=f"layers.{i // n_runs}", metric=metric, first_step=100 + i % 5000,
                last_step=120 + i % 5000, fired_step=102 + i % 5000, magnitude=rng.uniform(1, 20), magnitude_unit="σ",
                phase="steady", state=state, fired_at=fired, resolved_at=fired + timedelta(minutes=10) if resolved else None,
                verdict=(rng.choice(["true_positive", "false_alarm"]) if resolved and rng.random() < 0.5 else None),
                reviewed_at=None if unlooked or not resolved else fired + timedelta(minutes=20),
                incident=incident_of[run.pk]))
        alerts = Alert.objects.bulk_create(alerts, batch_size=5000)
        changes = []
        for alert in alerts:
            changes.append(AlertChange(alert=alert, kind=ChangeKind.FIRED, step=alert.fired_step, at=alert.fired_at))
            if alert.state == "acknowledged":
                changes.append(AlertChange(alert=alert, kind=ChangeKind.ACKNOWLEDGED, by=user, at=alert.fired_at + timedelta(minutes=3)))
            if alert.resolved_at:
                changes.append(AlertChange(alert=alert, kind=ChangeKind.RESOLVED, step=alert.last_step, at=alert.resolved_at))
            if alert.verdict:
                changes.append(AlertChange(alert=alert, kind=ChangeKind.VERDICT, by=user, verdict=alert.verdict,
                                           at=alert.fired_at + timedelta(minutes=15)))
        AlertChange.objects.bulk_create(changes, batch_size=5000)
        with connection.cursor() as cursor:
            # Each run's incident: its first alert as the origin; firing while one of its alerts is open.
            cursor.execute("""UPDATE alerts_incident i SET origin_id = a.first_id, state = CASE WHEN a.open THEN 'firing' ELSE 'resolved' END
                              FROM (SELECT incident_id, min(id) AS first_id, bool_or(state <> 'resolved') AS open
                                    FROM alerts_alert GROUP BY incident_id) a WHERE a.incident_id = i.id""")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return len(changes)


def time_paths(repeat: int) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from ingest.models import Run

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    last_page = (Run.objects.count() + 49) // 50
    one_run = Run.objects.order_by("-last_seen_at").values_list("run_id", flat=True).first()
    paths = {
        "runs list page": "/",
        "runs list page, search": "/?q=sweep%201",
        "runs list page, last page": f"/?page={last_page}",
        "runs API": "/api/v1/runs/",
        "inbox page": "/inbox/",
        "inbox API": "/api/v1/inbox/",
        "run page": f"/runs/{one_run}/",
        "audit report": "/reports/rules/?project=pretrain",
        "audit report API": "/api/v1/reports/rules/?project=pretrain",
        "fatigue page": "/reports/fatigue/?project=pretrain",
        "rules list": "/rules/",
    }
    rows = []
    for name, path in paths.items():
        for _ in range(2):
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code, response.content[:500])
        with CaptureQueriesContext(connection) as queries:
            response = client.get(path)
        count = len(queries)  # now: the captured list is read lazily from a log the next request clears
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(path)
            times.append((time.perf_counter() - started) * 1000)
        rows.append({"name": name, "path": path, "median_ms": statistics.median(times), "max_ms": max(times),
                     "bytes": len(response.content), "queries": count, "target_ms": TARGETS_MS.get(name)})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL, no database")
    parser.add_argument("--db", default="wl_readpaths_bench")
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--alerts", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--reuse", action="store_true", help="keep the database when it holds this seed already")
    args = parser.parse_args()
    note = f"read_paths seed v1: {args.runs} runs, {args.alerts} alerts"
    must_seed = fresh_database(args.server, args.db, args.reuse, note)
    setup_django(f"{args.server}/{args.db}")
    if must_seed:
        started = time.perf_counter()
        changes = seed(args.runs, args.alerts, random.Random(23))
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"COMMENT ON DATABASE \"{args.db}\" IS %s", [note])
        print(f"seeded {args.runs:,} runs, {args.runs * len(SERIES):,} series, {args.alerts:,} alerts, "
              f"{changes:,} alert changes, {args.runs:,} incidents in {time.perf_counter() - started:.0f} s")
    else:
        print(f"reusing {args.db} ({note})")
    rows = time_paths(args.repeat)
    print(f"\n{'path':<28} {'median':>9} {'slowest':>9} {'bytes':>9} {'queries':>8}  target")
    missed = 0
    for row in rows:
        target = row["target_ms"]
        verdict = "" if target is None else (f"≤ {target} ms  " + ("MET" if row["median_ms"] <= target else "MISSED"))
        missed += verdict.endswith("MISSED")
        print(f"{row['name']:<28} {row['median_ms']:>6.0f} ms {row['max_ms']:>6.0f} ms {row['bytes']:>9,} {row['queries']:>8}  {verdict}")
    print(f"\n(median and slowest of {args.repeat} requests after 2 warm-ups; {args.runs:,} runs, {args.alerts:,} alerts)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
