"""A run object over the console's bounds (tags, config size, budget) is cut by the client, never refused:
every batch carries the run line, so one oversized field would otherwise have the whole run's data refused."""
import logging

from tests.client.support import read_json, read_points

import warninglight  # noqa: E402  (tests.client.support puts client/ on the path)

FAST = {"flush_seconds": 0.05, "backoff": 0.05}


def test_oversized_identity_is_cut_and_the_points_arrive(console_server, token, tmp_path, caplog):
    tags = {f"tag{i}": "x" for i in range(300)}
    tags["k" * 200] = "v" * 400
    config = {"vocab": ["w" * 16] * 20_000}  # ~380 KiB as JSON
    with caplog.at_level(logging.WARNING, logger="warninglight"):
        with warninglight.watch(run_id="big-identity", url=console_server.url, token=token, tags=tags, config=config,
                                budget={"steps": 10**20}, spool_dir=tmp_path, **FAST) as wl:
            for step in range(10):
                wl.log(step, loss=1.0 / (step + 1))
    assert wl.stats["rejected"] == 0 and wl.stats["spooled"] == 0
    assert [p["step"] for p in read_points(token, "big-identity", "loss")] == list(range(10))
    run = read_json(token, "/api/v1/runs/big-identity/")
    assert len(run["tags"]) == 256 and all(len(k) <= 128 for k in run["tags"])
    assert run["config"] in (None, {}) and not run.get("budget")
    said = caplog.text
    assert "only the first 256" in said and "config not sent" in said and "budget.steps not sent" in said
