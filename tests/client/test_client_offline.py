"""The client when the console is down or absent, bad input, bounded memory, the health hook, no PyTorch."""
import http.server
import json
import logging
import math
import subprocess
import sys
import threading
import time
import types

import pytest

from tests.client.support import CLIENT_DIR, closed_port, read_points

import warninglight  # noqa: E402  (tests.client.support puts client/ on the path)

FAST = {"flush_seconds": 0.05, "backoff": 0.05, "code_rev": False}


def spool_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.django_db
def test_console_down_logging_stays_fast_spools_everything_and_the_spool_imports_exactly(token, tmp_path):
    from django.core.management import call_command

    url = f"http://127.0.0.1:{closed_port()}"
    wl = warninglight.watch(run_id="offline/job-1", url=url, token=token, spool_dir=tmp_path, config={"lr": 0.1}, **FAST)
    started = time.perf_counter()
    for step in range(20_000):
        wl.log(step, loss=1.0 / (step + 1))
    elapsed = time.perf_counter() - started
    wl.log(20_000, loss=math.nan)
    wl.log(20_001, component="layers.0", grad_norm=math.inf)
    wl.phase("eval")
    wl.event(20_001, "layers.0", "exploding", 3.5)
    wl.close()
    wl.close()  # twice is fine
    wl.log(1, loss=1.0)  # after close: ignored, no error

    assert elapsed < 1.0, f"20,000 log() calls took {elapsed:.3f} s with the console down"
    assert wl.spool_path == tmp_path / "offline_job-1.ndjson"  # "/" in the run id becomes "_"
    lines = spool_lines(wl.spool_path)
    assert lines[0]["type"] == "run" and lines[0]["id"] == "offline/job-1" and lines[0]["config"] == {"lr": 0.1}
    assert [x["type"] for x in lines].count("run") == 1
    assert wl.stats["spooled"] == 20_004 == len(lines) - 1 and wl.stats["dropped"] == 0 and wl.stats["rejected"] == 0

    call_command("import_jsonl", str(wl.spool_path), token=token)
    loss = read_points(token, "offline/job-1", "loss")
    assert [p["step"] for p in loss] == list(range(20_001))
    assert [p["value"] for p in loss[:3]] == [1.0, 0.5, 1 / 3] and loss[-1]["value"] == "NaN"
    assert read_points(token, "offline/job-1", "grad_norm", component="layers.0") == [{"step": 20_001, "value": "Infinity"}]


def test_without_a_url_everything_is_spooled(tmp_path, monkeypatch):
    monkeypatch.delenv("WARNINGLIGHT_URL", raising=False)
    with warninglight.watch(run_id="no-url", spool_dir=tmp_path, **FAST) as wl:
        wl.log(0, loss=1.0)
    assert [x["type"] for x in spool_lines(tmp_path / "no-url.ndjson")] == ["run", "point"]


def test_bad_input_never_raises_and_is_counted(tmp_path, caplog):
    class Weird:
        def __float__(self):
            raise RuntimeError("no")

    caplog.set_level(logging.WARNING, logger="warninglight")
    with warninglight.watch(run_id="bad input", spool_dir=tmp_path, **FAST) as wl:  # the run id is fixed up
        wl.log("three", loss=1.0)
        wl.log(-1, loss=1.0)
        wl.log(2.5, loss=1.0)
        wl.log(None, loss=1.0)
        wl.log(True, loss=1.0)
        wl.log(1, loss="2.5")
        wl.log(1, loss=None)
        wl.log(1, loss=Weird())
        wl.log(1, loss=10**400)
        wl.log(1, {"bad name!": 1.0, 3: 1.0})
        wl.log(1, component="bad component", grad_norm=1.0)
        wl.log(1, component=7, grad_norm=1.0)
        wl.log(1, ["not", "a", "dict"])
        wl.phase(None)
        wl.phase("x" * 65)
        wl.event(1, "layers.0", "on_fire", 1.0)
        wl.event(1, "layers.0", "dead", "big")
        wl.event(1, None, "dead", 1.0)
        wl.event(1, "layers.0", "dead", 1.0, detail={"big": "x" * 5000})
        wl._health_points(1, [("grad_norm", "layers.0", object())])
        wl._health_points(1, None)
        wl.log(2.0, loss=2.0)  # a whole float step is fine
        wl.log(3, loss=True)  # a bool is a number
    assert wl.run_id == "bad-input"
    assert wl.stats["rejected"] == 22
    points = [x for x in spool_lines(wl.spool_path) if x["type"] == "point"]
    assert [(p["step"], p["value"]) for p in points] == [(2, 2.0), (3, 1.0)]
    warned = [r.getMessage() for r in caplog.records]
    assert sum("step must be" in m for m in warned) == 1  # once per kind, not once per item


def test_a_full_queue_drops_the_oldest_and_counts_them(tmp_path):
    with warninglight.watch(run_id="overflow", spool_dir=tmp_path, max_queue=100, flush_seconds=30, code_rev=False) as wl:
        for step in range(1000):
            wl.log(step, loss=float(step))
    steps = [x["step"] for x in spool_lines(wl.spool_path) if x["type"] == "point"]
    assert wl.stats["dropped"] > 0 and wl.stats["dropped"] + len(steps) == 1000
    assert steps == sorted(steps) and steps[-1] == 999  # the newest are kept


def test_spool_files_are_appended_per_identity_and_keep_one_run_line(tmp_path):
    for _ in range(2):
        with warninglight.watch(run_id="again", spool_dir=tmp_path, config={"lr": 1}, **FAST) as wl:
            wl.log(len(list(tmp_path.iterdir())), loss=1.0)
    with warninglight.watch(run_id="again", spool_dir=tmp_path, config={"lr": 2}, **FAST) as changed:
        changed.log(5, loss=1.0)
    first = spool_lines(tmp_path / "again.ndjson")
    assert [x["type"] for x in first] == ["run", "point", "point"]
    assert changed.spool_path == tmp_path / "again.2.ndjson"
    assert spool_lines(changed.spool_path)[0]["config"] == {"lr": 2}


class _Refusing(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(self.headers["X-Batch-Id"])
        body = json.dumps({"errors": [{"path": "lines[2].value", "message": "line 2: no"}]}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_refused_batch_is_not_retried_and_kept_apart_from_the_spool(tmp_path, caplog):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with warninglight.watch(run_id="refused", url=f"http://127.0.0.1:{server.server_address[1]}", token="t",
                                spool_dir=tmp_path, **FAST) as wl:
            wl.log(0, loss=1.0)
    finally:
        server.shutdown()
        server.server_close()
    assert len(_Refusing.seen) == 1 and wl.stats["retries"] == 0
    assert wl.spool_path is None and wl.rejected_path == tmp_path / "refused.rejected.ndjson"
    assert [x["type"] for x in spool_lines(wl.rejected_path)] == ["run", "point"]
    assert any("lines[2].value: line 2: no" in r.getMessage() for r in caplog.records)


def test_the_health_hook_is_created_lazily_and_called_on_run_level_logs(tmp_path, monkeypatch):
    calls = []

    class Health:
        def __init__(self, wl, model, every, optimizer):
            calls.append(("init", model, every, optimizer))
            self.wl = wl

        def on_log(self, step, metrics=None):
            calls.append(("on_log", step, metrics))
            self.wl._health_points(step, [("grad_norm", "layers.0", 0.5), ("weight_norm", "layers.0", 2.0)])
            if step == 2:
                self.wl.event(step, "layers.0", "dead", 1.0)

        def close(self):
            calls.append(("close",))

    fake = types.ModuleType("warninglight.health")
    fake.Health = Health
    monkeypatch.setitem(sys.modules, "warninglight.health", fake)
    monkeypatch.setattr(warninglight, "health", fake, raising=False)
    with warninglight.watch(run_id="healthy", spool_dir=tmp_path, model="MODEL", optimizer="OPT", health_every=3, **FAST) as wl:
        for step in range(2):
            wl.log(step, loss=1.0)
            wl.log(step, component="layers.1", act_norm=1.0)  # per-component: no health call
        wl.log(2, {"eval/loss": 2.0}, lr=0.1)
    assert calls == [("init", "MODEL", 3, "OPT"), ("on_log", 0, {"loss": 1.0}), ("on_log", 1, {"loss": 1.0}),
                     ("on_log", 2, {"eval/loss": 2.0, "lr": 0.1}), ("close",)]
    lines = spool_lines(wl.spool_path)
    assert sum(x["type"] == "point" and x.get("component") == "layers.0" for x in lines) == 6
    assert [x["condition"] for x in lines if x["type"] == "event"] == ["dead"]


def test_a_failing_health_hook_is_switched_off_and_never_raises(tmp_path, monkeypatch):
    class Health:
        def __init__(self, wl, model, every, optimizer):
            self.closed = False

        def on_log(self, step, metrics=None):
            raise ValueError("bug in a hook")

        def close(self):
            raise ValueError("and in close")

    fake = types.ModuleType("warninglight.health")
    fake.Health = Health
    monkeypatch.setitem(sys.modules, "warninglight.health", fake)
    monkeypatch.setattr(warninglight, "health", fake, raising=False)
    with warninglight.watch(run_id="hookless", spool_dir=tmp_path, model=object(), **FAST) as wl:
        wl.log(0, loss=1.0)
        wl.log(1, loss=1.0)
    assert [x["step"] for x in spool_lines(wl.spool_path) if x["type"] == "point"] == [0, 1]


def test_the_package_imports_and_spools_with_the_standard_library_alone(tmp_path):
    # -I: no PYTHONPATH, no user site; -S: no site-packages at all, so neither torch nor numpy can be found.
    code = f"""
import logging, sys
sys.path.insert(0, {str(CLIENT_DIR)!r})
logging.basicConfig(level=logging.WARNING, format="%(message)s")
import warninglight
assert not [m for m in sys.modules if m.split(".")[0] in ("torch", "numpy", "django")], sorted(sys.modules)
with warninglight.watch(run_id="stdlib", spool_dir={str(tmp_path)!r}, model=object(), code_rev=False) as wl:
    wl.log(0, loss=1.0)
print("OK", wl.spool_path.name)
"""
    result = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK stdlib.ndjson"
    assert "needs PyTorch" in result.stderr
