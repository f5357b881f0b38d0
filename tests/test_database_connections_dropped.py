"""After PostgreSQL drops every connection (restart, failover, pg_terminate_backend), nothing fails because of it.

The pool hands out only connections that answer; a read-only request or an
evaluation whose connection died while held runs once more on a fresh one.
Each test ends every session of the test database from a separate admin
connection, as a restart would.
"""
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection

from alerts.starter import install_starter_pack
from ingest.models import BatchReceipt, Run
from tests.worker_support import terminate_every_connection, unevaluated, wait_until

pytestmark = pytest.mark.postgres


def points(run_id, steps, nan_at=None):
    return {"run": {"id": run_id}, "points": [
        {"step": s, "metric": "loss", "value": "NaN" if s == nan_at else 2.0 - 0.01 * s} for s in steps]}


def nonfinite_alerts(alerts):
    return [(a["rule"]["name"], a["state"]) for a in alerts if a["rule"]["name"] == "nonfinite-loss"]


def test_reads_ingest_and_evaluation_through_the_server_succeed_after_every_connection_is_dropped(console_server, project, token):
    install_starter_pack(project)
    auth = {"Authorization": f"Bearer {token}"}
    url = console_server.url

    def read(path):
        with httpx.Client(base_url=url, headers=auth, timeout=30) as http:
            return http.get(path).status_code

    with httpx.Client(base_url=url, headers=auth, timeout=30) as http:
        assert http.post("/api/v1/ingest", json=points("dropped", range(10))).status_code == 202
    with ThreadPoolExecutor(6) as pool:  # concurrent requests: the pool holds several connections
        assert set(pool.map(read, ["/api/v1/runs/dropped/"] * 12)) == {200}
    connection.close()  # this test's own connection goes back to the pool too

    assert terminate_every_connection() >= 2
    reads = [read(path) for path in ["/api/v1/runs/", "/api/v1/runs/dropped/", "/api/v1/alerts/?run=dropped",
                                     "/api/v1/runs/dropped/points/?metric=loss"] * 10]
    assert reads == [200] * 40

    terminate_every_connection()
    with httpx.Client(base_url=url, headers=auth, timeout=30) as http:
        assert http.post("/api/v1/ingest", json=points("dropped", range(10, 20), nan_at=15)).status_code == 202
        # Evaluated in the server (no worker here): the NaN fired the starter pack's rule.
        assert nonfinite_alerts(http.get("/api/v1/alerts/", params={"run": "dropped"}).json()["results"]) == [("nonfinite-loss", "firing")]
    assert not BatchReceipt.objects.filter(evaluated_at__isnull=True).exists()


def test_a_read_whose_held_connection_died_is_answered_on_a_fresh_one(transactional_db, api, token):
    auth = f"Bearer {token}"
    assert api.get("/api/v1/runs/", HTTP_AUTHORIZATION=auth).status_code == 200  # this thread now holds a connection
    terminate_every_connection()
    assert api.get("/api/v1/runs/", HTTP_AUTHORIZATION=auth).status_code == 200


@pytest.mark.redis
def test_a_worker_evaluates_the_next_batches_after_every_connection_is_dropped(celery_worker, sender, project):
    install_starter_pack(project)
    with celery_worker(pool="prefork"):
        assert sender.post(points("worker-dropped", range(10))).status_code == 202
        assert wait_until(lambda: not unevaluated(), 30)
        connection.close()

        assert terminate_every_connection() >= 1  # the worker's connection among them
        assert sender.post(points("worker-dropped", range(10, 20), nan_at=12)).status_code == 202
        assert wait_until(lambda: not unevaluated(), 30), "the worker failed the batch after the restart"
        assert sender.post(points("worker-dropped", range(20, 30))).status_code == 202
        assert wait_until(lambda: not unevaluated(), 30)
    assert Run.objects.get(run_id="worker-dropped").last_step == 29
    fired = [a["step"] for a in sender.get("/api/v1/alerts/", run="worker-dropped").json()["results"] if a["rule"]["name"] == "nonfinite-loss"]
    assert fired == [12]  # the batch evaluated after the restart was judged
