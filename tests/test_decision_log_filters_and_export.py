"""The decision log per run and per project, filtered, and exported as JSONL with the same entries."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import Run
from reviews.lifecycle import write_entry
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def log(project, other_project, oncall):
    a = Run.objects.create(project=project, run_id="r-a", max_step=10)
    b = Run.objects.create(project=project, run_id="r-b", max_step=20)
    hidden = Run.objects.create(project=other_project, run_id="r-hidden", max_step=5)
    now = timezone.now()
    entries = [
        write_entry(a, by=oncall, observation="spike at 9", explanations=["bad batch", "lr too high"], decision="",
                    owner="Alice", now=now - timedelta(days=2)),
        write_entry(b, by=oncall, observation="stalled rank 3", explanations=["node failure"], owner="Bob", now=now - timedelta(days=1)),
        write_entry(hidden, by=None, observation="other team's note", explanations=["x"], owner="Vision"),
    ]
    return entries


def test_the_log_is_filtered_by_run_project_owner_and_time(log, oncall):
    client = client_for(oncall)
    observations = lambda query: [e["observation"] for e in client.get("/api/v1/decisions/" + query).json()["entries"]]
    assert observations("") == ["spike at 9", "stalled rank 3"]  # never another project's
    assert observations("?run=r-b") == ["stalled rank 3"]
    assert observations("?project=pretrain&owner=alice") == ["spike at 9"]
    since = (timezone.now() - timedelta(hours=36)).isoformat().replace("+00:00", "Z")
    assert observations(f"?since={since}") == ["stalled rank 3"]
    assert observations("?decision=none") == ["spike at 9", "stalled rank 3"]
    assert observations("?decision=terminate") == []
    bad = client.get("/api/v1/decisions/?decision=abort")
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "decision"


def test_the_jsonl_export_streams_the_same_entries_one_per_line(log, oncall):
    client = client_for(oncall)
    answer = client.get("/api/v1/decisions/?project=pretrain&format=jsonl")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/x-ndjson"
    lines = b"".join(answer.streaming_content).decode().splitlines()
    exported = [json.loads(line) for line in lines]
    listed = client.get("/api/v1/decisions/?project=pretrain").json()["entries"]
    assert [e["id"] for e in exported] == [e["id"] for e in listed]
    assert exported[0]["explanations"] == ["bad batch", "lr too high"] and exported[0]["run"] == "r-a"


def test_the_log_page_lists_a_runs_entries_and_offers_writing_only_to_on_call(log, oncall, teammate):
    page = client_for(oncall).get("/decisions/?run=r-a").content.decode()
    assert "spike at 9" in page and "stalled rank 3" not in page and 'id="entry-form"' in page
    viewer_page = client_for(teammate).get("/decisions/?run=r-a").content.decode()
    assert "spike at 9" in viewer_page and 'id="entry-form"' not in viewer_page
    refused = client_for(teammate).post("/decisions/new/", {"run": "r-a", "observation": "x", "explanations": "y"})
    assert refused.status_code == 403


def test_writing_an_entry_from_the_page_and_a_refused_one_names_the_field(log, oncall):
    client = client_for(oncall)
    done = client.post("/decisions/new/", {"run": "r-a", "observation": "grad norm back in band",
                                           "explanations": "the bad batch passed\nlr warmup ended", "owner": "Alice"})
    assert done.status_code == 302
    page = client.get("/decisions/?run=r-a").content.decode()
    assert "grad norm back in band" in page and "lr warmup ended" in page
    refused = client.post("/decisions/new/", {"run": "r-a", "observation": "x", "explanations": "", "next_step": "5"})
    assert refused.status_code == 400
    text = refused.content.decode()
    assert 'data-field="explanations"' in text
