"""Which rank of a multi-process job sends what, read from the files and the spool the client writes (no console):
rank 0 alone by default (`RANK`, else `LOCAL_RANK`, else 0), a watch that does nothing elsewhere; with per-rank
signals every rank's own series under `rank<N>`, the job's only from rank 0; one spool file per rank.
(The real multi-process runs against a live console: tests/client/test_multi_process_training.py.)"""
import json

import pytest

import tests.client.support  # noqa: F401  (the client importable)
import warninglight


@pytest.fixture(autouse=True)
def _no_rank_env(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "WARNINGLIGHT_PER_RANK", "WARNINGLIGHT_URL", "WARNINGLIGHT_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def spooled(tmp_path, run_id, **options):
    with warninglight.watch(run_id, spool_dir=tmp_path, code_rev=False, config={"lr": 0.1}, **options) as wl:
        wl.phase("steady", 0)
        for step in (1, 2):
            wl.log(step, loss=1.0 / step)
            wl.log(step, component="layers.3", grad_norm=0.5)
        wl.event(2, "layers.3", "dead", 1.0)
        wl.restart(2)
        wl.log(2, loss=0.4)
    if wl.spool_path is None:
        return wl, None
    lines = [json.loads(line) for line in wl.spool_path.read_text().splitlines()]
    return wl, lines


@pytest.mark.parametrize("env, sends", [({}, True), ({"RANK": "0"}, True), ({"RANK": "1"}, False),
                                        ({"LOCAL_RANK": "1"}, False), ({"RANK": "0", "LOCAL_RANK": "1"}, True)])
def test_only_global_rank_zero_sends_by_default(monkeypatch, tmp_path, env, sends):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    wl, lines = spooled(tmp_path, "job")
    assert (lines is not None) is sends
    if not sends:
        assert not wl.sending and wl.stats["enqueued"] == 0 and list(tmp_path.iterdir()) == []


def test_per_rank_signals_go_under_the_rank_and_the_job_series_come_from_rank_zero(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("WARNINGLIGHT_PER_RANK", "1")
    monkeypatch.setenv("RANK", "1")
    wl1, rank1 = spooled(tmp_path, "job")
    monkeypatch.setenv("RANK", "0")
    wl0, rank0 = spooled(tmp_path, "job")
    assert wl1.spool_path.name == "job.rank1.ndjson" and wl0.spool_path.name == "job.rank0.ndjson"

    # Rank 1: its own series only, the bare run line, no phase (a restart phase would start an attempt).
    assert rank1[0] == {"type": "run", "id": "job"}
    assert {(p["metric"], p.get("component")) for p in rank1 if p["type"] == "point"} == {
        ("loss", "rank1"), ("grad_norm", "rank1/layers.3")}
    assert [p["type"] for p in rank1].count("phase") == 0
    assert [e["component"] for e in rank1 if e["type"] == "event"] == ["rank1/layers.3"]
    # ... and after its restart the re-sent step is sent again (a new attempt on its own series).
    assert [p["step"] for p in rank1 if p["type"] == "point" and p["metric"] == "loss"] == [1, 2, 2]

    # Rank 0: the job's identity, phases and loss, and its own series beside them.
    assert rank0[0]["config"] == {"lr": 0.1}
    assert {(p["metric"], p.get("component")) for p in rank0 if p["type"] == "point"} == {
        ("loss", None), ("loss", "rank0"), ("grad_norm", "rank0/layers.3")}
    assert [p["phase"] for p in rank0 if p["type"] == "phase"] == ["steady", "restart"]


def test_a_single_process_spools_as_before(tmp_path):
    wl, lines = spooled(tmp_path, "job", rank=0)
    assert wl.spool_path.name == "job.ndjson"
    assert {(p["metric"], p.get("component")) for p in lines if p["type"] == "point"} == {
        ("loss", None), ("grad_norm", "layers.3")}
