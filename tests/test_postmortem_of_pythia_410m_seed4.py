"""The postmortem of the real pythia-410m-seed4 run lists its failed restore with the alert and the rewinds.

At step 122001 the job resumed from the step-122000 checkpoint on a new host and its loss diverged at
122002 (data/real-runs/labels.json); that attempt stopped at 122049 and the next one resumed from the same
checkpoint, re-sending 122001-122049. The starter pack's loss-spike alert fires within 20 steps of 122002
(tests/test_band_rules.py). The earlier restarts (7001, 55001 with a replay, 104001, 121001) are benign.
Importing the run (~144k lines) is slow, so one test asserts all of it.
"""
import pytest

from ingest.models import Run
from reviews.chronicle import Cause
from reviews.postmortem import postmortem
from tests.factories import client_for
from tests.real_runs_support import import_real, labels

pytestmark = pytest.mark.django_db

NAME = "pythia-410m-seed4"


def test_the_postmortem_lists_the_failed_restore_with_the_alert_and_the_rewinds(project, token, owner, django_capture_on_commit_callbacks):
    from alerts.starter import install_starter_pack

    install_starter_pack(project)
    import_real(token, django_capture_on_commit_callbacks, NAME)
    [incident] = labels(NAME)["incidents"]
    onset = incident["start_step"]  # 122002
    run = Run.objects.get(run_id=NAME)
    data = postmortem(run)
    segments = labels(NAME)["segments"]
    benign = [e["start_step"] for e in labels(NAME)["benign_events"] if e["kind"] == "restart"]  # 7001, 55001, 104001, 121001

    # One attempt per segment of the source run, with its steps.
    rows = data["attempts"]
    assert [(a["first_step"], a["last_step"]) for a in rows] == [(s["first_step"], s["last_step"]) for s in segments]
    failed, rewind = rows[-2], rows[-1]

    # The failed restore: the restart just before the onset, followed by the loss-spike alert.
    assert failed["start_step"] == onset - 1 and not failed["is_rewind"] and failed["failed_restore"]
    [alert] = failed["followed_by"]
    assert alert["rule"] == "loss-spike" and alert["first_step"] == onset and alert["fired_step"] - onset <= 20
    # The rewind: the next attempt re-sent the failed one's steps from the same checkpoint; the alert is its cause.
    assert rewind["is_rewind"] and (rewind["previous_max_step"], rewind["start_step"]) == (failed["last_step"], failed["start_step"])
    assert rewind["cause"] == Cause.NUMERIC
    assert [a["rule"] for a in rewind["evidence"][Cause.NUMERIC]] == ["loss-spike"]
    assert failed["steps_kept"] == 0 and failed["steps_computed"] == failed["last_step"] - failed["start_step"] + 1

    # The benign restarts are the other interruptions: no alert before or after them.
    others = rows[1:-2]
    assert [a["start_step"] for a in others] == benign
    assert all(a["cause"] == Cause.UNKNOWN and not a["failed_restore"] for a in others)
    replayed = [s["replayed_steps"] for s in segments if s["replayed_steps"]]
    assert [[a["start_step"], a["previous_max_step"]] for a in rows if a["is_rewind"]] == replayed
    assert replayed[-1] == [failed["start_step"], failed["last_step"]]

    summary = data["summary"]
    assert summary["interruptions"] == len(segments) - 1 and summary["failed_restores"] == 1
    assert {c["cause"]: c["count"] for c in summary["interruptions_by_cause"]} == {Cause.UNKNOWN: len(benign) + 1, Cause.NUMERIC: 1}
    kept = set()
    for s in segments:
        kept |= set(range(s["first_step"], s["last_step"] + 1))
    assert summary["steps_computed"] == sum(s["rows"] for s in segments) and summary["steps_kept"] == len(kept)
    [listed] = data["incidents"]
    assert listed["origin"]["rule"] == "loss-spike" and listed["first_step"] == onset

    # The chronicle and the Markdown say the same, in words.
    titles = [e["title"] for e in data["chronicle"] if e["kind"] in ("restart", "rewind")]
    assert titles[-2:] == [
        f"Attempt {failed['number']}: restart at step {onset - 1}; cause: unknown; failed restore (loss-spike right after)",
        f"Attempt {rewind['number']}: rewind from step {failed['last_step']} to {onset - 1}; cause: numeric alert (loss-spike)",
    ]
    response = client_for(owner).get(f"/api/v1/runs/{NAME}/postmortem.md")
    assert response.status_code == 200
    markdown = response.content.decode()
    assert f"| {rewind['number']} | rewind {failed['last_step']:,} → {onset - 1:,} | {onset - 1:,} | {rewind['last_step']:,} | numeric alert (loss-spike) |" in markdown
    assert f"failed restore: loss-spike at step {onset:,}" in markdown
    for step in benign:
        assert f"at {step:,} |" in markdown or f"→ {step:,} |" in markdown
