"""A local HTTP receiver for the notification tests (a real http.server in a thread), and an incident made by ingest.

`receiver` answers each POST with the next status of `receiver.statuses` (then 200) and keeps what it was sent:
method, path, headers (case-insensitive), raw body. `grad_spike` sends points that fire a `notify` threshold rule on components.
"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from notifications.channels import save_channel
from notifications.models import Channel
from tests.factories import make_rule

SECRET = "s3cret-signing-key"


class Receiver:
    def __init__(self):
        self.requests = []
        self.statuses = []
        self.hold = None  # a threading.Event: each answer waits for it (a receiver that is slow to answer)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append({"path": self.path, "headers": self.headers, "body": body})
                if outer.hold is not None:
                    outer.hold.wait(30)
                status = outer.statuses.pop(0) if outer.statuses else 200
                answer = b"{}" if status < 400 else b"receiver says no"
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def bodies(self):
        return [json.loads(r["body"]) for r in self.requests]

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def make_channel(project, kind="webhook", url="", name=None, secret="", config=None, **fields) -> Channel:
    return save_channel(Channel(project=project, name=name or f"{kind}-channel", kind=kind, url=url, secret=secret,
                                config=config or {}, **fields), source="test")


def spike_rule(project, response="notify", name="grad-high"):
    """grad_norm above 10 on any component fires at once; three points below resolve it."""
    return make_rule(project, name=name, kind="threshold", scope={"metrics": ["grad_norm"]},
                     persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0}, response=response)


def grad_points(step, high=(), components=("layers.0", "layers.1", "layers.2")):
    return [{"step": step, "metric": "grad_norm", "component": c, "value": 50.0 if c in high else 1.0} for c in components]


def post_points(sender, run_id, points):
    response = sender.post({"run": {"id": run_id}, "points": points})
    assert response.status_code == 202, response.content
    return response


def fire(sender, run_id="run-n", step=100, high=("layers.1", "layers.2")):
    """Two components spike at one step: two alerts, one incident."""
    return post_points(sender, run_id, grad_points(step, high))


def calm(sender, run_id="run-n", after=100, points=3):
    for step in range(after + 1, after + 1 + points):
        post_points(sender, run_id, grad_points(step))
