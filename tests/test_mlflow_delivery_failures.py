"""When the MLflow sender cannot write: no MLflow run named (not retried), a server error or no server (retried)."""
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest

from notifications.message import ChannelTarget
from notifications.senders import mlflow
from tests.mlflow_support import incident_message


class Handler(BaseHTTPRequestHandler):
    """A stand-in tracking server that answers every call with the status its test set, and remembers the calls."""

    status = 200
    calls = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.calls.append((self.path, self.headers.get("Authorization"), orjson.loads(body)))
        payload = b"{}" if self.status == 200 else orjson.dumps({"error_code": "INTERNAL_ERROR", "message": "database is locked"})
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def stand_in():
    Handler.calls = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def tagged(run="a1b2c3"):
    return incident_message(run_tags={"mlflow_run_id": run})


def test_no_mlflow_run_id_is_a_failure_that_names_what_is_missing(stand_in):
    outcome = mlflow.send(ChannelTarget(kind="mlflow", url=stand_in, config={"runs": {"another-run": "f00"}}), incident_message())
    assert not outcome.ok and not outcome.retry
    assert "pythia-410m-seed4" in outcome.detail and "mlflow_run_id" in outcome.detail and "runs" in outcome.detail
    assert Handler.calls == []


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_server_error_is_retried(stand_in, status, monkeypatch):
    monkeypatch.setattr(Handler, "status", status)
    outcome = mlflow.send(ChannelTarget(kind="mlflow", url=stand_in), tagged())
    assert not outcome.ok and outcome.retry and outcome.status_code == status
    assert outcome.detail == f"HTTP {status}"  # the server's own words are never shown back (issue 21)


def test_a_refused_connection_is_retried():
    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as httpd:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
    outcome = mlflow.send(ChannelTarget(kind="mlflow", url=url, timeout=2), tagged())
    assert not outcome.ok and outcome.retry and "unreachable" in outcome.detail


def test_the_channels_token_is_sent_as_a_bearer_and_never_shown(stand_in):
    outcome = mlflow.send(ChannelTarget(kind="mlflow", url=stand_in + "/", secret="s3cret-token"), tagged("abc123"))
    assert outcome.ok and "s3cret" not in outcome.detail
    [(path, authorization, body)] = Handler.calls
    assert (path, authorization, body["run_id"]) == ("/api/2.0/mlflow/runs/log-batch", "Bearer s3cret-token", "abc123")


def test_a_tracking_uri_that_is_not_a_server_is_refused_without_retry():
    outcome = mlflow.send(ChannelTarget(kind="mlflow", url="file:///tmp/mlruns"), tagged())
    assert not outcome.ok and not outcome.retry and "http(s)" in outcome.detail
