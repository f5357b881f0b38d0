"""Each main page and list API makes the same number of queries with 3 runs or 9, 6 alerts or 18: a baseline per page.

The way NetBox tests it: a page whose query count grows with the rows it shows (one query per run, per
incident, per rule) is fast in a test and slow at 3,000 runs (benchmarks/read_paths.py). Each path is read at
a small size and at three times that size; the counts must be equal, and at most the page's baseline, so a
change that adds a query to a page is seen (raise the baseline on purpose, never to make the test pass).
"""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from alerts.incidents import group_new_alerts
from alerts.models import Alert
from ingest.models import Layer, Run, Series
from tests.factories import client_for, make_alert, make_rule
from tests.notify_support import make_channel

pytestmark = pytest.mark.django_db

FIRST = "run-000"

# path: the queries it makes (session and user included), whatever the number of runs, alerts and rules. The audit
# report reads each input for every rule at once (audit/report.py); on PostgreSQL its figures' query runs in a
# transaction of its own with roomier settings (audit/figures.py: two more statements and a savepoint).
BASELINES = {
    # The runs list and run page read each run's badge (alerts/health.py: open trouble, needs review) in two
    # queries for the page; the run page also lists runs to compare with and reads its archive mark.
    "/": 10,
    "/?q=run&page=1": 10,
    "/inbox/": 15,
    f"/runs/{FIRST}/": 32,
    "/reports/rules/?project=pretrain": 16,
    "/reports/fatigue/?project=pretrain": 9,
    "/rules/?project=pretrain": 7,
    "/api/v1/runs/": 4,
    "/api/v1/inbox/": 5,  # with the runs that need review
    f"/api/v1/alerts/?run={FIRST}": 5,
    f"/api/v1/incidents/?run={FIRST}": 6,
    "/api/v1/rules/": 4,
    "/api/v1/channels/": 7,
}


@pytest.fixture
def grow(project):
    rules = [make_rule(project, kind="nonfinite"), make_rule(project, kind="threshold")]
    make_channel(project, name="oncall-hook", url="http://127.0.0.1:9/hook")

    def add(runs):
        """`runs` more runs (each with series in two layers, a firing alert and one that ended with nobody
        looking, grouped into an incident) and two more alerts on the first run."""
        start = Run.objects.count()
        for i in range(start, start + runs):
            run = Run.objects.create(project=project, run_id=f"run-{i:03d}", tags={"team": "pretrain"})
            Series.objects.create(run=run, metric="grad_norm", layer=Layer.NUMERICS)
            Series.objects.create(run=run, metric="loss", layer=Layer.OPTIMIZATION)
            make_alert(rules[0], run=run, component="layers.0", metric="grad_norm")
            make_alert(rules[1], run=run, component="layers.1", metric="grad_norm", state="resolved")
            group_new_alerts(run)
        first = Run.objects.get(run_id=FIRST)
        for k in range(runs):
            made = Alert.objects.filter(run=first).count()
            make_alert(rules[k % 2], run=first, component=f"extra.{made}", metric="grad_norm", state="resolved")
        group_new_alerts(first)

    return add


def queries(client, path) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(captured)


def test_every_main_page_and_list_api_makes_a_fixed_number_of_queries(owner, grow):
    client = client_for(owner)
    grow(3)
    small = {path: queries(client, path) for path in BASELINES}
    grow(6)
    large = {path: queries(client, path) for path in BASELINES}
    assert large == small, "a page's query count grew with the data"
    over = {path: (n, BASELINES[path]) for path, n in large.items() if n > BASELINES[path]}
    assert over == {}, "queries beyond the page's baseline: (made, baseline)"


def test_the_runs_list_pages_and_keeps_the_search(owner, project):
    Run.objects.bulk_create([Run(project=project, run_id=f"sweep-{i:03d}", name="lr sweep") for i in range(60)]
                            + [Run(project=project, run_id=f"other-{i:03d}") for i in range(5)])
    client = client_for(owner)
    first = client.get("/", {"q": "sweep"}).content.decode()
    assert first.count('<tr data-run="sweep-') == 50 and 'data-run="other-' not in first
    assert "Page 1 of 2 · 60 runs" in first and 'href="?q=sweep&amp;page=2"' in first
    second = client.get("/", {"q": "sweep", "page": "2"}).content.decode()
    assert second.count('<tr data-run="sweep-') == 10 and 'href="?q=sweep&amp;page=1"' in second


def test_the_runs_api_pages_with_count_and_next(owner, project, api):
    Run.objects.bulk_create([Run(project=project, run_id=f"r-{i:03d}") for i in range(120)])
    api.force_login(owner)
    first = api.get("/api/v1/runs/").json()
    assert (first["count"], len(first["results"]), first["previous"]) == (120, 100, None)
    rest = api.get(first["next"]).json()
    assert len(rest["results"]) == 20 and rest["next"] is None
    seen = {r["id"] for r in first["results"] + rest["results"]}
    assert len(seen) == 120
    assert api.get("/api/v1/runs/", {"limit": 0}).json()["errors"][0]["path"] == "limit"
    assert api.get("/api/v1/runs/", {"limit": 501}).status_code == 400
    assert len(api.get("/api/v1/runs/", {"limit": 500}).json()["results"]) == 120
