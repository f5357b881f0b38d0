"""A real `mlflow server` (from `.venv-mlflow`, which bin/test creates) for the MLflow sender's tests, and its REST API.

One server per test session, on SQLite in a temporary folder, single process (no job runner): starting one
costs seconds (see the suite's figures in docs/testing.md). Under CI a missing MLflow fails the tests that need it.
"""
import os
import shutil
import signal
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from notifications.message import IncidentMessage
from tests.conftest import IN_CI
from tests.process_support import free_port, wait_for

MLFLOW = Path(__file__).resolve().parent.parent / ".venv-mlflow" / "bin" / "mlflow"


class MlflowServer:
    def __init__(self, url):
        self.url = url
        self.http = httpx.Client(base_url=f"{url}/api/2.0/mlflow", timeout=10)

    def call(self, method, path, **kwargs):
        response = self.http.request(method, path, **kwargs)
        assert response.status_code == 200, response.text
        return response.json()

    def create_run(self, name="pythia-410m seed 4") -> str:
        experiment = self.call("POST", "/experiments/create", json={"name": f"exp-{os.urandom(6).hex()}"})["experiment_id"]
        return self.call("POST", "/runs/create", json={"experiment_id": experiment, "run_name": name})["run"]["info"]["run_id"]

    def tags(self, run_id) -> dict:
        data = self.call("GET", "/runs/get", params={"run_id": run_id})["run"]["data"]
        return {t["key"]: t["value"] for t in data.get("tags", []) if t["key"].startswith("warninglight.")}

    def history(self, run_id, key) -> list[dict]:
        return self.call("GET", "/metrics/get-history", params={"run_id": run_id, "metric_key": key}).get("metrics", [])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    binary = str(MLFLOW) if MLFLOW.exists() else shutil.which("mlflow")
    if binary is None:
        message = "needs MLflow's `mlflow server` in .venv-mlflow (bin/test creates it)"
        if IN_CI:
            pytest.fail(f"CI must run this test, but it {message}")
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = folder / "server.log"
    # The job runner (huey consumers) serves MLflow's own async jobs, which these tests never start.
    environment = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [binary, "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
             "--default-artifact-root", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"],
            stdout=output, stderr=subprocess.STDOUT, env=environment, start_new_session=True,
        )
    server = MlflowServer(f"http://127.0.0.1:{port}")

    def healthy():
        assert process.poll() is None, log.read_text()[-3000:]
        try:
            return httpx.get(f"{server.url}/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        # A fresh database is migrated first: some 10-20 s on a busy 2-core machine.
        wait_for("mlflow server to start", healthy, timeout=120)
        yield server
    finally:
        server.http.close()
        # The server and the worker it starts; killed outright (a graceful stop takes ~5 s and keeps nothing we need).
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def incident_message(**fields) -> IncidentMessage:
    """An opened incident of run `pythia-410m-seed4`: a non-finite gradient in layers.4 at step 1200."""
    defaults = dict(
        event="opened", incident_id=17, project="pretrain", run_id="pythia-410m-seed4", run_pk=3,
        run_tags={"team": "pretrain"}, rule="grad-nonfinite", rule_kind="nonfinite", severity="notify",
        component="layers.4", metric="grad_norm", step=1200, magnitude=3.0, magnitude_unit="non-finite points in a row",
        owner="Pretrain on-call", runbook_url="https://runbooks.example/grad-nonfinite",
        run_url="http://console.example/runs/pythia-410m-seed4/?step=1200&component=layers.4",
        incident_url="http://console.example/inbox/?incident=17", alerts=1,
        opened_at=datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc),
    )
    return IncidentMessage(**{**defaults, **fields})
