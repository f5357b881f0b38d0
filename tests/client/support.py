"""Helpers for the client tests: the client importable from client/, a fault-injecting HTTP proxy, reading back."""
import contextlib
import http.client
import http.server
import importlib
import os
import socket
import sys
import threading
from pathlib import Path

CLIENT_DIR = Path(__file__).resolve().parents[2] / "client"
if str(CLIENT_DIR) not in sys.path:  # normally `pip install -e ./client` (bin/test); this keeps a bare checkout working
    sys.path.insert(0, str(CLIENT_DIR))


IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def need(module: str):
    """Import a third-party package a test needs (the test extra installs it): skipped on a laptop
    without it, a failure under CI, like the postgres/redis/browser markers."""
    import pytest

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"CI must run this test, but {module} is not installed (pip install -e '.[test]'): {exc}")
        pytest.skip(f"needs {module} (pip install -e '.[test]')", allow_module_level=True)


def closed_port() -> int:
    """A local port nothing listens on (connections are refused at once)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


class Proxy:
    """An HTTP proxy in front of the live console that can misbehave on request.

    mode "forward": pass requests through; "down": answer 503 without forwarding.
    `unavailable` > 0: answer that many requests 503 with `Retry-After: <retry_after>` (1 s by default), as the
    console does while its database is down or restarting, then forward again.
    `drop_responses` > 0: forward the request (the console stores it), then close the
    connection without answering, that many times (a timeout on the way back).
    Every POST is recorded as (X-Batch-Id, number of NDJSON lines, status or "dropped").
    """

    def __init__(self, target_port, serial=False):
        proxy = self
        self.target_port = target_port
        # serial: one request at a time to the console, as the test database (SQLite in memory, shared cache:
        # a second writer gets "table is locked" at once, with no busy wait) needs with several clients.
        self.serial = serial
        self.one_at_a_time = threading.Lock()
        self.mode = "forward"
        self.drop_responses = 0
        self.unavailable = 0
        self.retry_after = "1"
        self.requests = []
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                batch_id = self.headers.get("X-Batch-Id")
                lines = len([line for line in body.split(b"\n") if line.strip()])
                if proxy.mode == "down":
                    proxy._record(batch_id, lines, 503)
                    self._answer(503, b'{"detail": "down for maintenance"}')
                    return
                with proxy.lock:
                    unavailable = proxy.unavailable > 0
                    if unavailable:
                        proxy.unavailable -= 1
                if unavailable:
                    proxy._record(batch_id, lines, 503)
                    self._answer(503, b'{"errors": [{"path": "", "message": "the database is unavailable"}]}', {"Retry-After": proxy.retry_after})
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
                with proxy.one_at_a_time if proxy.serial else contextlib.nullcontext():
                    upstream = http.client.HTTPConnection("127.0.0.1", proxy.target_port, timeout=30)
                    upstream.request("POST", self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    upstream.close()
                with proxy.lock:
                    drop = proxy.drop_responses > 0
                    if drop:
                        proxy.drop_responses -= 1
                if drop:
                    proxy._record(batch_id, lines, "dropped")
                    self.close_connection = True  # stored upstream, but the client never hears of it
                    return
                proxy._record(batch_id, lines, response.status)
                self._answer(response.status, data)

            def _answer(self, status, data, headers=()):
                self.send_response(status)
                for name, value in dict(headers).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _record(self, batch_id, lines, status):
        with self.lock:
            self.requests.append((batch_id, lines, status))

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def read_points(token, run_id, metric, component=None, attempt=None):
    from rest_framework.test import APIClient

    params = {"metric": metric}
    if component:
        params["component"] = component
    if attempt:
        params["attempt"] = attempt
    response = APIClient().get(f"/api/v1/runs/{run_id}/points/", params, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return response.json()["points"]


def read_json(token, path):
    from rest_framework.test import APIClient

    response = APIClient().get(path, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return response.json()


def alerts_of(token, run_id):
    """The run's alerts as `GET /api/v1/alerts/?run=` gives them, by fired step then id."""
    alerts = read_json(token, f"/api/v1/alerts/?run={run_id}")
    alerts = alerts["results"] if isinstance(alerts, dict) else alerts
    return sorted(alerts, key=lambda a: (a["fired_step"], a["id"]))


def tiny_lm_data(n, seed, vocab=64, length=32):
    """`n` token rows a tiny language model learns quickly: each row counts up from a random start, by a
    random stride of 1 to 3 (mod `vocab`). A torch LongTensor (n, length)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    return (start + stride * torch.arange(length)) % vocab
