"""/healthz says the process answers; /readyz says whether the database and the broker do, naming the one that does
not (never its address or password). Both answer a probe that names the pod's address, which ALLOWED_HOSTS does not."""
import pytest
from django.db import connection

from tests.process_support import free_port

POD = {"HTTP_HOST": "10.42.0.17:8000"}  # how a kubelet asks: by the pod's address


def test_healthz_answers_whatever_host_the_probe_names(client, db):
    response = client.get("/healthz", **POD)
    assert (response.status_code, response.content) == (200, b"ok\n")
    assert client.get("/api/v1/runs/", **POD).status_code == 400  # the host check still guards everything else


def test_readyz_is_ready_when_the_database_and_broker_answer(client, db, settings):
    response = client.get("/readyz", **POD)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ready"] is True and body["failed"] == []
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("ok")


def test_readyz_names_an_unreachable_broker_without_its_password(client, db, settings):
    settings.REDIS_URL = f"redis://:hunter2-password@127.0.0.1:{free_port()}/5"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["failed"] == ["broker"] and body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("unreachable")
    assert b"hunter2" not in response.content and b"127.0.0.1" not in response.content


def test_healthz_and_readyz_answer_only_reads(client, db):
    assert client.post("/healthz").status_code == 405
    assert client.delete("/readyz").status_code == 405


@pytest.fixture
def database_down(transactional_db):
    """PostgreSQL's clients see a stopped server: the pool pointed at a port nothing listens on (as in
    tests/test_database_down_answers_503.py), pointed back afterwards."""
    settings = connection.settings_dict
    saved = settings["PORT"], settings["OPTIONS"]
    connection.close()
    connection.close_pool()
    settings["PORT"] = free_port()
    settings["OPTIONS"] = {**saved[1], "pool": {**saved[1].get("pool", {}), "min_size": 0, "timeout": 1}}
    yield
    connection.close()
    connection.close_pool()
    settings["PORT"], settings["OPTIONS"] = saved


@pytest.mark.postgres
def test_readyz_is_503_while_the_database_is_down_and_healthz_still_answers(client, database_down, settings):
    settings.READY_TIMEOUT_SECONDS = 3
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert "database" in body["failed"]
    assert body["checks"]["database"] != "ok"
    assert client.get("/healthz").status_code == 200
    metrics = client.get("/metrics")  # the counts are still served; the backlog says it could not be read
    assert metrics.status_code == 200 and b"warninglight_database_up 0.0" in metrics.content
