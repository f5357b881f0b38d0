"""An event's free-form detail may hold an integer past 64 bits (the contract takes any number within the float
range); the JSONL export writes it exactly instead of failing the whole export with a 500 (found by Schemathesis
on PostgreSQL, which keeps such integers as they were sent)."""
import json

import pytest

from tests.export_support import body_of
from tests.factories import client_for

pytestmark = pytest.mark.django_db

HUGE = 2**70 + 1


def test_a_run_export_writes_a_huge_integer_in_an_events_detail(sender, owner):
    event = {"step": 3, "component": "gpu0", "condition": "dead", "magnitude": float("nan"),
             "detail": {"ecc_errors": HUGE, "nested": [HUGE, 1.5]}}
    # Written by the standard library: the sender's own orjson cannot write such an integer either.
    assert sender.post(json.dumps({"run": {"id": "huge"}, "events": [event]})).status_code == 202
    response = client_for(owner).get("/api/v1/runs/huge/export/?format=jsonl")
    assert response.status_code == 200
    lines = [json.loads(line) for line in body_of(response).splitlines() if line.strip()]
    [exported] = [line for line in lines if line["type"] == "event"]
    stored = exported["detail"]
    # PostgreSQL keeps the integer exactly; SQLite's JSON holds it as the nearest float. Either way it is there.
    assert stored["ecc_errors"] in (HUGE, float(HUGE)) and stored["nested"][1] == 1.5
    assert exported["magnitude"] == "NaN"
