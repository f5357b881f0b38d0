"""The one-line client against a live console (uvicorn serving the real ASGI app in this process)."""
import math
import re

import numpy as np

from ingest.models import BatchReceipt, Project
from tests.client.support import Proxy, need, read_json, read_points

import warninglight  # noqa: E402  (tests.client.support puts client/ on the path)

FAST = {"flush_seconds": 0.05, "backoff": 0.05}


def test_the_one_liner_sends_points_phases_events_and_identity_that_read_back_exactly(console_server, token, tmp_path):
    losses = {s: 3.0 - s / 100 for s in range(40)}
    losses[10], losses[11], losses[12] = math.nan, math.inf, -math.inf
    config = {"lr": 3e-4, "batch_size": 512, "warmup": math.nan, "layers": [1, 2]}
    with warninglight.watch(run_id="llama-ft-7", url=console_server.url, token=token, config=config, code_rev="9f2c1e0",
                            data_snapshot="corpus-2026-11-01", budget={"steps": 1000, "gpu_hours": 8.0},
                            name="Llama fine-tune", tags={"team": "pretrain"}, spool_dir=tmp_path, **FAST) as wl:
        wl.phase("warmup", step=0)
        for step in range(40):
            if step == 20:
                wl.phase("steady")  # the last logged step: 19
            wl.log(step, loss=losses[step], lr=np.float32(0.5) if step % 2 else 3e-4)
            wl.log(step, component="layers.3", grad_norm=np.float64(step / 10))
            wl.log(step, {"eval/loss": step, "tokens_per_s": np.int64(1000 + step)})
        wl.phase("eval")
        wl.event(30, "layers.3", "exploding", 12.5, detail={"ratio": 4.0})
        wl.event(31, "node1", "oscillating", math.inf)

    assert wl.stats["spooled"] == 0 and wl.stats["rejected"] == 0 and wl.stats["dropped"] == 0
    assert wl.stats["sent_points"] == 40 * 5 and wl.stats["sent_events"] == 2 and wl.stats["sent_phases"] == 3
    assert wl.spool_path is None

    def wire(v):
        return "NaN" if v != v else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else v)

    assert read_points(token, "llama-ft-7", "loss") == [{"step": s, "value": wire(losses[s])} for s in range(40)]
    assert read_points(token, "llama-ft-7", "lr") == [{"step": s, "value": 0.5 if s % 2 else 3e-4} for s in range(40)]
    assert read_points(token, "llama-ft-7", "grad_norm", component="layers.3") == [{"step": s, "value": s / 10} for s in range(40)]
    assert read_points(token, "llama-ft-7", "eval/loss") == [{"step": s, "value": float(s)} for s in range(40)]
    assert [p["value"] for p in read_points(token, "llama-ft-7", "tokens_per_s")] == [1000.0 + s for s in range(40)]

    run = read_json(token, "/api/v1/runs/llama-ft-7/")
    assert run["code_rev"] == "9f2c1e0" and run["data_snapshot"] == "corpus-2026-11-01" and run["name"] == "Llama fine-tune"
    assert run["config"] == {"lr": 3e-4, "batch_size": 512, "warmup": "NaN", "layers": [1, 2]}
    assert run["budget"]["steps"] == 1000 and run["tags"] == {"team": "pretrain"}
    assert run["identity_changes"] == []
    assert [(p["step"], p["phase"]) for p in run["phases"]] == [(0, "warmup"), (19, "steady"), (39, "eval")]

    events = read_json(token, "/api/v1/runs/llama-ft-7/events/")["events"]
    assert [(e["step"], e["component"], e["condition"]) for e in events] == [(30, "layers.3", "exploding"), (31, "node1", "oscillating")]
    assert events[0]["magnitude"] == 12.5 and events[0]["detail"] == {"ratio": 4.0}
    assert events[1]["detail"] == {"magnitude": "Infinity"}  # a non-finite magnitude: ±float max, real value in detail


def test_code_rev_defaults_to_git_head(console_server, token, tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-C", str(repo)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    monkeypatch.chdir(repo)
    with warninglight.watch(run_id="rev", url=console_server.url, token=token, spool_dir=tmp_path / "spool", **FAST) as wl:
        wl.log(0, loss=1.0)
    assert read_json(token, "/api/v1/runs/rev/")["code_rev"] == head
    monkeypatch.chdir(tmp_path)  # not a repository: no code_rev, no error
    assert warninglight.git_code_rev() is None


def test_many_points_go_in_several_requests_each_within_batch_points(console_server, token, tmp_path):
    with warninglight.watch(run_id="batched", url=console_server.url, token=token, spool_dir=tmp_path, batch_points=250,
                            flush_seconds=30) as wl:
        for step in range(1000):
            wl.log(step, loss=1.0 / (step + 1), lr=1e-3)
    receipts = list(BatchReceipt.objects.filter(run__run_id="batched"))
    assert len(receipts) == 8 == wl.stats["requests"]
    assert all(r.points + r.events + r.phases <= 250 for r in receipts)
    assert sum(r.points for r in receipts) == 2000
    ids = sorted(r.batch_id for r in receipts)
    assert all(re.fullmatch(r"batched:[0-9a-f]{32}:\d+", i) for i in ids) and len(set(ids)) == 8
    assert [p["step"] for p in read_points(token, "batched", "loss")] == list(range(1000))


def test_a_batch_whose_response_was_lost_is_resent_with_its_batch_id_and_stored_once(console_server, token, tmp_path):
    with Proxy(console_server.port) as proxy:
        proxy.drop_responses = 1  # the console stores the first batch, the client never hears back
        with warninglight.watch(run_id="resent", url=proxy.url, token=token, spool_dir=tmp_path, **FAST) as wl:
            for step in range(10):
                wl.log(step, loss=float(step))
            assert wl.flush(10)
            for step in range(10, 20):
                wl.log(step, loss=float(step))
    first_id = proxy.requests[0][0]
    assert proxy.requests[0][2] == "dropped" and proxy.requests[1] == (first_id, 11, 200)  # same id, answered as a duplicate
    assert wl.stats["duplicates"] == 1 and wl.stats["spooled"] == 0
    points = read_points(token, "resent", "loss", attempt="all")
    assert [(p["step"], p["attempt"]) for p in points] == [(s, 1) for s in range(20)]
    assert BatchReceipt.objects.filter(run__run_id="resent").count() == 2


def test_a_503_while_the_consoles_database_restarts_is_retried_after_retry_after_and_nothing_is_spooled(console_server, token, tmp_path):
    import time

    with Proxy(console_server.port) as proxy:
        proxy.unavailable = 2  # the console's database is restarting: 503, Retry-After: 1
        with warninglight.watch(run_id="db-restart", url=proxy.url, token=token, spool_dir=tmp_path, **FAST) as wl:
            started = time.monotonic()
            for step in range(10):
                wl.log(step, loss=float(step))
            assert wl.flush(30)
            took = time.monotonic() - started
    batch_id = proxy.requests[0][0]
    assert proxy.requests == [(batch_id, 11, 503), (batch_id, 11, 503), (batch_id, 11, 202)]  # one batch, tried again
    assert took >= 2.0  # it waited the Retry-After each time, not its own 0.05-s back-off
    assert wl.stats["retries"] == 2 and wl.stats["spooled"] == 0 and not wl.stats["console_down"]
    assert [p["step"] for p in read_points(token, "db-restart", "loss")] == list(range(10))


def test_a_console_that_comes_back_gets_the_rest_and_the_spool_holds_exactly_the_gap(console_server, token, tmp_path):
    import json
    import time

    from django.core.management import call_command

    with Proxy(console_server.port) as proxy:
        with warninglight.watch(run_id="gap", url=proxy.url, token=token, spool_dir=tmp_path, retries=2, probe_seconds=0.1,
                                config={"lr": 0.1}, **FAST) as wl:
            for step in range(10):
                wl.log(step, loss=float(step))
            assert wl.flush(10)
            proxy.mode = "down"  # 503 for everything
            for step in range(10, 20):
                wl.log(step, loss=float(step))
            assert wl.flush(10)
            assert wl.stats["console_down"] and wl.stats["spooled"] == 10 and wl.stats["retries"] == 2
            proxy.mode = "forward"
            time.sleep(0.3)  # past the next probe: the next batch tries the console first
            for step in range(20, 40):
                wl.log(step, loss=float(step))
            assert wl.flush(10)
            assert not wl.stats["console_down"]
    refused = [r for r in proxy.requests if r[2] == 503]
    assert len(refused) == 3 and len({r[0] for r in refused}) == 1  # one batch, tried 1 + 2 times with its batch id
    assert all(r[2] == 202 for r in proxy.requests if r[2] != 503)
    assert [p["step"] for p in read_points(token, "gap", "loss")] == list(range(10)) + list(range(20, 40))

    lines = [json.loads(line) for line in wl.spool_path.read_text().splitlines()]
    assert wl.spool_path == tmp_path / "gap.ndjson"
    assert lines[0]["type"] == "run" and lines[0]["id"] == "gap" and lines[0]["config"] == {"lr": 0.1}
    assert [(x["type"], x["step"], x["value"]) for x in lines[1:]] == [("point", s, float(s)) for s in range(10, 20)]
    call_command("import_jsonl", str(wl.spool_path), token=token)
    points = read_points(token, "gap", "loss", attempt="all")
    assert [(p["step"], p["value"], p["attempt"]) for p in points] == [(s, float(s), 1) for s in range(40)]


def test_a_stop_action_reaches_should_stop_and_the_client_acts_on_nothing(console_server, project, token, tmp_path):
    from tests.test_ingest_actions import make_rule

    Project.objects.filter(pk=project.pk).update(read_only=False)
    make_rule(project)  # nonfinite loss, permitted response "stop"
    with warninglight.watch(run_id="stop-me", url=console_server.url, token=token, spool_dir=tmp_path, **FAST) as wl:
        for step in range(5):
            wl.log(step, loss=2.0)
        assert wl.flush(10)
        assert not wl.should_stop and wl.actions == []
        wl.log(5, loss=math.nan)
        assert wl.flush(10)
        assert wl.should_stop
        [action] = wl.actions
        assert action["action"] == "stop" and action["rule"] == "loss-nonfinite"
        for step in range(6, 9):  # still open: the directive is repeated, listed once
            wl.log(step, loss=2.0)
        assert wl.flush(10)
        assert wl.actions == [action]
    assert [p["step"] for p in read_points(token, "stop-me", "loss")] == list(range(9))  # nothing stopped


def test_a_wrong_token_spools_and_the_spool_imports_with_the_right_one(console_server, token, tmp_path):
    from django.core.management import call_command

    with warninglight.watch(run_id="tokenless", url=console_server.url, token="wl_wrong", spool_dir=tmp_path, **FAST) as wl:
        for step in range(30):
            wl.log(step, loss=float(step))
    assert wl.stats["requests"] == 0 and wl.stats["spooled"] == 30 and wl.stats["retries"] == 0  # a 401 is not retried
    call_command("import_jsonl", str(wl.spool_path), token=token)
    assert [p["step"] for p in read_points(token, "tokenless", "loss")] == list(range(30))


def test_torch_scalars_are_converted_in_the_sender_thread(console_server, token, tmp_path):
    torch = need("torch")
    weight = torch.tensor(2.0, requires_grad=True)
    with warninglight.watch(run_id="tensors", url=console_server.url, token=token, spool_dir=tmp_path, **FAST) as wl:
        for step in range(5):
            loss = weight * step
            wl.log(step, loss=loss, lr=torch.tensor(float("nan")))
            wl.log(torch.tensor(step + 5), loss=torch.tensor(1.5, dtype=torch.float64))
            wl.log(step, component="layers.0", grad_norm=torch.ones(3).norm())
        wl.log(99, bad=torch.ones(3))  # not a scalar: rejected, never raised
    assert [p["value"] for p in read_points(token, "tensors", "loss")] == [0.0, 2.0, 4.0, 6.0, 8.0] + [1.5] * 5
    assert {p["value"] for p in read_points(token, "tensors", "lr")} == {"NaN"}
    assert wl.stats["rejected"] == 1
