"""Every example of contract v1 goes in through POST and comes back through GET with the same values."""
import math

import pytest

CONTRACT_BATCH = {
    "batch_id": "job-7:000123",
    "run": {
        "id": "llama-ft-7",
        "name": "Llama fine-tune, lr 3e-4",
        "code_rev": "9f2c1e0",
        "data_snapshot": "corpus-2026-11-01",
        "config": {"lr": 0.0003, "batch_size": 512},
        "budget": {"steps": 100000, "gpu_hours": 512.0},
        "tags": {"team": "pretrain", "cluster": "a"},
    },
    "phases": [{"step": 0, "phase": "warmup"}, {"step": 2000, "phase": "steady"}],
    "points": [
        {"step": 39553, "metric": "loss", "value": 2.31},
        {"step": 39553, "metric": "grad_norm", "component": "layers.3.attn", "value": "NaN", "time": 1764400000.5},
    ],
    "events": [{"step": 39553, "component": "node1", "condition": "oscillating", "magnitude": 7.674}],
}

pytestmark = [pytest.mark.django_db, pytest.mark.roundtrip]


def test_contract_example_batch_is_accepted_with_the_documented_receipt(sender):
    response = sender.post(CONTRACT_BATCH)
    assert response.status_code == 202, response.content
    assert response.json() == {
        "run": "llama-ft-7",
        "accepted": {"points": 2, "events": 1, "phases": 2},
        "duplicate": False,
        "actions": [],
    }


def test_contract_example_reads_back_identity_phases_and_values(sender):
    sender.post(CONTRACT_BATCH)
    run = sender.get("/api/v1/runs/llama-ft-7/").json()
    assert run["id"] == "llama-ft-7"
    for key in ("name", "code_rev", "data_snapshot", "config", "budget", "tags"):
        assert run[key] == CONTRACT_BATCH["run"][key]
    assert [(p["step"], p["phase"]) for p in run["phases"]] == [(0, "warmup"), (2000, "steady")]
    assert run["last_step"] == 39553

    loss = sender.get("/api/v1/runs/llama-ft-7/points/", metric="loss").json()
    assert loss == {"run": "llama-ft-7", "metric": "loss", "component": None, "points": [{"step": 39553, "value": 2.31}]}
    grad = sender.get("/api/v1/runs/llama-ft-7/points/", metric="grad_norm", component="layers.3.attn").json()
    assert grad["component"] == "layers.3.attn"
    assert grad["points"] == [{"step": 39553, "value": "NaN"}]


@pytest.mark.parametrize(
    "sent, expected",
    [
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        (2.31, 2.31),
        (-0.0, -0.0),
        (1e-308, 1e-308),
        (1.7976931348623157e308, 1.7976931348623157e308),
        (0.1 + 0.2, 0.30000000000000004),
    ],
)
def test_values_round_trip_exactly(sender, sent, expected):
    batch = {"run": {"id": "values"}, "points": [{"step": 1, "metric": "loss", "value": sent}]}
    assert sender.post(batch).status_code == 202
    got = sender.get("/api/v1/runs/values/points/", metric="loss").json()["points"][0]["value"]
    if isinstance(expected, float):
        assert got == expected and math.copysign(1, got) == math.copysign(1, expected)
    else:
        assert got == expected


def test_python_json_bare_nonfinite_tokens_are_accepted(sender):
    body = '{"run": {"id": "bare"}, "points": [{"step": 1, "metric": "loss", "value": NaN}, {"step": 2, "metric": "loss", "value": Infinity}, {"step": 3, "metric": "loss", "value": -Infinity}]}'
    assert sender.post(body).status_code == 202
    points = sender.get("/api/v1/runs/bare/points/", metric="loss").json()["points"]
    assert [p["value"] for p in points] == ["NaN", "Infinity", "-Infinity"]


def test_ndjson_form_round_trips(sender):
    lines = [
        '{"type": "run", "id": "nd-1", "name": "NDJSON run", "code_rev": "abc"}',
        '{"type": "phase", "run": "nd-1", "step": 0, "phase": "warmup"}',
        '{"type": "point", "run": "nd-1", "step": 0, "metric": "loss", "value": 11.0}',
        '{"type": "point", "run": "nd-1", "step": 1, "metric": "loss", "value": "Infinity"}',
        '{"type": "event", "run": "nd-1", "step": 1, "component": "layers.0", "condition": "exploding", "magnitude": 40}',
    ]
    response = sender.post("\n".join(lines) + "\n", content_type="application/x-ndjson")
    assert response.status_code == 202, response.content
    assert response.json()["accepted"] == {"points": 2, "events": 1, "phases": 1}
    run = sender.get("/api/v1/runs/nd-1/").json()
    assert run["name"] == "NDJSON run" and run["code_rev"] == "abc"
    points = sender.get("/api/v1/runs/nd-1/points/", metric="loss").json()["points"]
    assert points == [{"step": 0, "value": 11.0}, {"step": 1, "value": "Infinity"}]


def test_contract_example_event_reads_back(sender):
    sender.post(CONTRACT_BATCH)
    events = sender.get("/api/v1/runs/llama-ft-7/events/").json()["events"]
    assert len(events) == 1
    event = events[0]
    assert (event["step"], event["component"], event["condition"], event["magnitude"]) == (39553, "node1", "oscillating", 7.674)
