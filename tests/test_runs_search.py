"""Runs are found by what a reviewer remembers of them: `?q=` on the runs page and GET /api/v1/runs/ matches the
run id, the name and any tag key or value, ignoring case; the page has the search box."""
import re

import pytest

from ingest.models import Run
from tests.factories import client_for


@pytest.fixture
def runs(project, other_project):
    Run.objects.create(project=project, run_id="pythia-410m-seed4", name="Pythia 410M, seed 4", tags={"team": "pretrain"})
    Run.objects.create(project=project, run_id="gpt-small-a", name="Warmup sweep", tags={"Dataset": "OpenWebText"})
    Run.objects.create(project=project, run_id="gpt-small-b", name="", tags={"lr": "3e-4"})
    Run.objects.create(project=other_project, run_id="pythia-hidden", name="Pythia elsewhere", tags={})


def page_runs(client, **query):
    html = client.get("/", query).content.decode()
    return sorted(re.findall(r'<tr data-run="([^"]+)"', html)), html


def api_runs(client, **query):
    answer = client.get("/api/v1/runs/", query)
    assert answer.status_code == 200
    return sorted(r["id"] for r in answer.json()["results"])


@pytest.mark.parametrize(("q", "expected"), [
    ("PYTHIA", ["pythia-410m-seed4"]),  # run id (and name), any case; never a run of a project the caller cannot see
    ("warmup", ["gpt-small-a"]),  # name
    ("dataset", ["gpt-small-a"]),  # tag key
    ("openweb", ["gpt-small-a"]),  # tag value
    ("PreTrain", ["pythia-410m-seed4"]),
    ("gpt-small", ["gpt-small-a", "gpt-small-b"]),
    ("team=pretrain", ["pythia-410m-seed4"]),  # a tag as the list shows it, key=value (the value's case ignored)
    ("Dataset=openweb", ["gpt-small-a"]),
    ("team=base", []),
    ("nothing-like-this", []),
    ("  ", ["gpt-small-a", "gpt-small-b", "pythia-410m-seed4"]),  # a blank search narrows nothing
])
def test_q_matches_run_id_name_and_tags_on_the_page_and_the_api(runs, owner, q, expected):
    client = client_for(owner)
    assert page_runs(client, q=q)[0] == expected
    assert api_runs(client, q=q) == expected


def test_the_runs_page_has_the_search_box_holding_the_search(runs, owner):
    _, html = page_runs(client_for(owner), q="warmup")
    box = re.search(r'<form[^>]*id="run-filters".*?</form>', html, re.S).group(0)
    assert re.search(r'<input type="search" name="q"[^>]*value="warmup"', box)
    _, html = page_runs(client_for(owner), q="nothing-like-this")
    assert "No run matches these filters." in html
