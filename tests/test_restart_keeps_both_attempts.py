"""A job that reloads a checkpoint re-sends steps: both attempts are kept and the rewind is recorded."""
import gzip
from pathlib import Path

import pytest
from django.core.management import call_command

from ingest.models import Run

pytestmark = pytest.mark.django_db
REAL_RUNS = Path(__file__).resolve().parent.parent / "data" / "real-runs"


def loss_batch(run_id, steps, offset=0.0, batch_id=None, phases=()):
    body = {
        "run": {"id": run_id},
        "phases": list(phases),
        "points": [{"step": s, "metric": "loss", "value": 10.0 - s / 100 + offset} for s in steps],
    }
    if batch_id:
        body["batch_id"] = batch_id
    return body


def test_resent_steps_start_a_new_attempt_and_default_read_shows_the_newest(sender):
    sender.post(loss_batch("r1", range(0, 50)))
    # The job crashed at 49, reloaded the checkpoint of step 29, and sends 30.. again.
    sender.post(loss_batch("r1", range(30, 60), offset=0.5))
    run = sender.get("/api/v1/runs/r1/").json()
    assert run["attempt"] == 2
    rewinds = [a["rewind"] for a in run["attempts"] if a["rewind"]]
    assert rewinds == [{"from_step": 49, "to_step": 30}]

    newest = sender.get("/api/v1/runs/r1/points/", metric="loss").json()["points"]
    assert [p["step"] for p in newest] == list(range(60))
    by_step = {p["step"]: p["value"] for p in newest}
    assert by_step[29] == pytest.approx(10.0 - 0.29)
    assert by_step[30] == pytest.approx(10.0 - 0.30 + 0.5)  # the second attempt wins

    every = sender.get("/api/v1/runs/r1/points/", metric="loss", attempt="all").json()["points"]
    assert len(every) == 80
    step_40 = [(p["attempt"], p["value"]) for p in every if p["step"] == 40]
    assert step_40 == [(1, pytest.approx(9.6)), (2, pytest.approx(10.1))]  # the older one stays readable


def test_restart_phase_starts_an_attempt_and_marks_a_rewind_only_when_steps_go_back(sender):
    sender.post(loss_batch("r2", range(1, 101)))
    # Resumed exactly at the checkpoint: a new attempt, but no step went back.
    sender.post(loss_batch("r2", range(101, 120), phases=[{"step": 101, "phase": "restart"}, {"step": 102, "phase": "steady"}]))
    # Crashed at 119, resumed from the checkpoint of 110.
    sender.post(loss_batch("r2", range(111, 130), offset=1.0, phases=[{"step": 111, "phase": "restart"}]))
    run = sender.get("/api/v1/runs/r2/").json()
    assert [(a["number"], a["reason"], a["start_step"]) for a in run["attempts"]] == [
        (1, "first", None),
        (2, "restart_phase", 101),
        (3, "restart_phase", 111),
    ]
    assert [a["rewind"] for a in run["attempts"]] == [None, None, {"from_step": 119, "to_step": 111}]


def test_replay_inside_one_ndjson_request_is_split_into_attempts(sender):
    lines = ['{"type":"run","id":"r3"}']
    lines += [f'{{"type":"point","run":"r3","step":{s},"metric":"loss","value":{s}}}' for s in range(10)]
    lines += ['{"type":"phase","run":"r3","step":5,"phase":"restart"}']
    lines += [f'{{"type":"point","run":"r3","step":{s},"metric":"loss","value":{s + 100}}}' for s in range(5, 12)]
    assert sender.post("\n".join(lines), content_type="application/x-ndjson").status_code == 202
    points = sender.get("/api/v1/runs/r3/points/", metric="loss").json()["points"]
    assert [p["value"] for p in points] == [0, 1, 2, 3, 4] + [s + 100 for s in range(5, 12)]
    assert len(sender.get("/api/v1/runs/r3/points/", metric="loss", attempt="all").json()["points"]) == 17


def test_out_of_order_steps_that_were_never_sent_are_not_a_rewind(sender):
    sender.post(loss_batch("r4", [0, 1, 2, 5, 6]))
    sender.post(loss_batch("r4", [3, 4]))  # late, but new
    run = sender.get("/api/v1/runs/r4/").json()
    assert run["attempt"] == 1
    points = sender.get("/api/v1/runs/r4/points/", metric="loss").json()["points"]
    assert [p["step"] for p in points] == [0, 1, 2, 3, 4, 5, 6]


def test_real_pythia_replay_keeps_every_attempt(token):
    """pythia-160m-seed4: two resumes at 61001 after crashes at 61186 and 61151 (public W&B logs)."""
    call_command("import_jsonl", str(REAL_RUNS / "pythia-160m-seed4.ndjson.gz"), token=token)
    run = Run.objects.get(run_id="pythia-160m-seed4")
    rewinds = [(a.previous_max_step, a.start_step) for a in run.attempts.all() if a.is_rewind]
    assert rewinds == [(61186, 61001), (61151, 61001)]
    series = run.series.get(metric="loss")
    from ingest.storage import read_points

    steps, _, _ = read_points(series)
    assert len(steps) == 143000 and steps[0] == 1 and steps[-1] == 143000
    all_steps, _, _ = read_points(series, all_attempts=True)
    with gzip.open(REAL_RUNS / "pythia-160m-seed4.ndjson.gz", "rt") as fh:
        sent = sum(1 for line in fh if '"type":"point"' in line)
    assert len(all_steps) == sent  # every point the job sent, replays included, is kept


def test_a_late_batch_of_new_steps_is_stored_in_the_same_attempt(sender):
    sender.post(loss_batch("r5", range(100, 200)))
    sender.post(loss_batch("r5", range(0, 100)))  # sent earlier by another client, arrived later
    run = sender.get("/api/v1/runs/r5/").json()
    assert run["attempt"] == 1 and [a["rewind"] for a in run["attempts"]] == [None]
    points = sender.get("/api/v1/runs/r5/points/", metric="loss", attempt="all").json()["points"]
    assert [p["step"] for p in points] == list(range(200))
