"""With PostgreSQL down or restarting, ingest, the API and the pages answer 503 with Retry-After, which senders retry.

PostgreSQL itself is shared by the suite, so it is not restarted: the console's
pool is pointed at a port nothing listens on, which is what a client of a
stopped server sees (connections refused), and pointed back afterwards.
"""
import pytest
from django.db import connection

from tests.process_support import free_port

pytestmark = pytest.mark.postgres


@pytest.fixture
def database_down(transactional_db):
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


def test_ingest_answers_503_with_retry_after_while_the_database_is_down(api, token, database_down):
    body = {"run": {"id": "during-restart"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]}
    response = api.post("/api/v1/ingest", body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert "database is unavailable" in response.json()["errors"][0]["message"]


@pytest.fixture
def logged_in(client, owner):
    client.force_login(owner)  # before the database goes: its session is stored there
    client.raise_request_exception = False  # the response the browser would get, not the exception behind it
    return client


def test_reads_and_pages_answer_503_too(api, logged_in, token, database_down):
    read = api.get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert (read.status_code, read["Content-Type"]) == (503, "application/json")
    assert int(read["Retry-After"]) >= 1
    page = logged_in.get("/")  # the session look-up itself fails: answered before any view runs
    assert page.status_code == 503 and int(page["Retry-After"]) >= 1
    assert "The database is unavailable" in page.content.decode()

