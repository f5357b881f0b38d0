"""A job resumed from a checkpoint writes a new event file from a step already sent: `warninglight follow`
sends it as a new attempt with its rewind, every point once, also across a follower started again."""
from tests.client.follow_support import f32, write_scalars
from tests.client.support import need, read_json, read_points

need("torch")
need("tensorboard")

from warninglight.follow import Follower  # noqa: E402


def follow_once(tmp_path, url, token):
    follower = Follower(tmp_path / "logs", url, token, spool_dir=tmp_path / "spool", flush_seconds=0.05)
    follower.follow(once=True)
    follower.close()
    return follower.stats()


def test_a_resumed_job_is_one_new_attempt_without_duplicates(console_server, token, tmp_path):
    run_dir = tmp_path / "logs" / "resumed"
    write_scalars(run_dir, [(s, "train/loss", 1.0) for s in range(1, 31)]).close()  # the job reached step 30
    assert follow_once(tmp_path, console_server.url, token)["points"] == 30

    # the job died and was resumed from the checkpoint of step 20 in a new process: a new event file
    write_scalars(run_dir, [(s, "train/loss", 2.0) for s in range(21, 41)]).close()
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2
    assert follow_once(tmp_path, console_server.url, token)["points"] == 20  # a follower started again: the new file only

    run = read_json(token, "/api/v1/runs/resumed/")
    assert run["attempt"] == 2
    assert [a["rewind"] for a in run["attempts"] if a["number"] == 2] == [{"from_step": 30, "to_step": 21}]
    assert [(p["step"], p["value"]) for p in read_points(token, "resumed", "loss")] == (
        [(s, 1.0) for s in range(1, 21)] + [(s, 2.0) for s in range(21, 41)])
    assert len(read_points(token, "resumed", "loss", attempt="all")) == 50

    assert follow_once(tmp_path, console_server.url, token)["points"] == 0  # once more: nothing
    assert read_json(token, "/api/v1/runs/resumed/")["attempt"] == 2


def test_a_resumed_job_read_after_the_fact_in_one_go(console_server, token, tmp_path):
    run_dir = tmp_path / "logs" / "both"
    write_scalars(run_dir, [(s, "train/loss", f32(s / 7)) for s in range(0, 50, 5)]).close()
    write_scalars(run_dir, [(s, "train/loss", f32(s / 9)) for s in range(25, 70, 5)]).close()
    assert follow_once(tmp_path, console_server.url, token)["points"] == 19
    run = read_json(token, "/api/v1/runs/both/")
    assert run["attempt"] == 2
    assert [a["rewind"] for a in run["attempts"] if a["number"] == 2] == [{"from_step": 45, "to_step": 25}]
    assert [p["value"] for p in read_points(token, "both", "loss")] == (
        [f32(s / 7) for s in range(0, 25, 5)] + [f32(s / 9) for s in range(25, 70, 5)])
