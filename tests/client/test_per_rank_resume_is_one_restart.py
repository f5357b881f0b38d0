"""A two-rank job with per-rank signals resumed from a checkpoint in new processes is ONE restart on the console,
whichever rank's request reaches it first: rank 0 announces the `restart` phase (and re-sends the job's and its
own steps), rank 1 only re-sends its own steps, and either may open the new attempt. A later, real second
restart still counts.

What each rank sends is what the real client writes (its spool file, posted over the ingest API as one
request per rank and process); the order the ranks' requests arrive in is the test's parameter.
(The real torchrun runs: tests/client/test_multi_process_training.py.)"""
import pytest

import tests.client.support  # noqa: F401  (the client importable)
import warninglight

RUN = "ddp-resumed"
# Whichever rank opened it, the attempt is the job's declared restart at the checkpoint, rewound from step 30.
RESUMED = (2, "restart_phase", 21, {"from_step": 30, "to_step": 21})


@pytest.fixture(autouse=True)
def _no_rank_env(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "WARNINGLIGHT_PER_RANK", "WARNINGLIGHT_URL", "WARNINGLIGHT_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def rank_process(tmp_path, name, rank, steps, value, resumed_at=None):
    """What one rank's process sends: the NDJSON its watch writes (no console: everything goes to its spool)."""
    directory = tmp_path / name
    with warninglight.watch(RUN, spool_dir=directory, code_rev=False, rank=rank, world_size=2, per_rank=True,
                            config={"lr": 0.1}) as wl:
        if resumed_at is not None:  # what the HF and Lightning callbacks do on every rank when a fit resumes
            wl.phase("restart", resumed_at)
            wl.phase("steady", resumed_at + 10)
        for step in steps:
            wl.log(step, loss=value)
    return wl.spool_path.read_bytes()


def job(tmp_path, name, steps, value, resumed_at=None):
    """{rank: request body} of both ranks' processes."""
    return {rank: rank_process(tmp_path, f"{name}-rank{rank}", rank, steps, value, resumed_at) for rank in (0, 1)}


def post_in_order(sender, requests, order):
    for rank in order:
        response = sender.post(requests[rank], content_type="application/x-ndjson")
        assert response.status_code == 202, response.content


def attempts(sender):
    run = sender.get(f"/api/v1/runs/{RUN}/").json()
    return run["attempt"], [(a["number"], a["reason"], a["start_step"], a["rewind"]) for a in run["attempts"]]


def newest(sender, component=None):
    params = {"metric": "loss", **({"component": component} if component else {})}
    return {p["step"]: p["value"] for p in sender.get(f"/api/v1/runs/{RUN}/points/", **params).json()["points"]}


@pytest.mark.django_db
@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["rank0-first", "rank1-first"])
def test_a_resume_under_two_ranks_is_one_restart_and_a_later_one_still_counts(sender, tmp_path, order):
    post_in_order(sender, job(tmp_path, "first", range(1, 31), 1.0), order)
    assert attempts(sender) == (1, [(1, "first", None, None)])

    # Both processes died at step 30; new ones resume the checkpoint of step 20.
    post_in_order(sender, job(tmp_path, "second", range(21, 41), 2.0, resumed_at=21), order)
    assert attempts(sender) == (2, [(1, "first", None, None), RESUMED])
    for component in (None, "rank0", "rank1"):
        by_step = newest(sender, component)
        assert sorted(by_step) == list(range(1, 41))
        assert {by_step[s] for s in range(1, 21)} == {1.0} and {by_step[s] for s in range(21, 41)} == {2.0}

    # They die again at 40 and resume the checkpoint of step 35: a second restart, and only one more.
    post_in_order(sender, job(tmp_path, "third", range(36, 46), 3.0, resumed_at=36), order)
    assert attempts(sender)[0] == 3
    assert attempts(sender)[1][2] == (3, "restart_phase", 36, {"from_step": 40, "to_step": 36})
    assert {newest(sender, "rank1")[s] for s in range(36, 46)} == {3.0}


@pytest.mark.django_db
def test_rank_one_arriving_on_both_sides_of_rank_zeros_restart_is_still_one_restart(sender, tmp_path):
    post_in_order(sender, job(tmp_path, "first", range(1, 31), 1.0), (0, 1))
    resumed = job(tmp_path, "second", range(21, 41), 2.0, resumed_at=21)
    # Rank 1's re-sent steps in two requests, rank 0's restart between them.
    head, _, rest = resumed[1].partition(b"\n")
    lines = rest.splitlines()
    half = len(lines) // 2
    for body in (head + b"\n" + b"\n".join(lines[:half]), resumed[0], head + b"\n" + b"\n".join(lines[half:])):
        assert sender.post(body, content_type="application/x-ndjson").status_code == 202
    assert attempts(sender) == (2, [(1, "first", None, None), RESUMED])
    assert {newest(sender, "rank1")[s] for s in range(21, 41)} == {2.0}


@pytest.mark.django_db
def test_a_job_that_rewinds_again_after_a_resumed_process_restarts_again(sender):
    """One sender: a new process re-sends steps without a restart phase (a new attempt), then goes back to an
    earlier checkpoint in that process and says so: that restart phase is a second restart, not the first's."""
    def points(steps, value):
        return [{"step": s, "metric": "loss", "value": value} for s in steps]

    sender.post({"run": {"id": RUN}, "points": points(range(1, 31), 1.0)})
    sender.post({"run": {"id": RUN}, "points": points(range(21, 41), 2.0)})
    sender.post({"run": {"id": RUN}, "phases": [{"step": 11, "phase": "restart"}], "points": points(range(11, 21), 3.0)})
    assert attempts(sender) == (3, [(1, "first", None, None), (2, "resent_step", 21, {"from_step": 30, "to_step": 21}),
                                    (3, "restart_phase", 11, {"from_step": 40, "to_step": 11})])
