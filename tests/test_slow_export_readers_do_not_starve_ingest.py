"""More slow export readers than the pool has connections, and another project's ingest still answers in under a second.

The real server (uvicorn in this process, its own PostgreSQL pool made small here), a project's token reading
the project's JSON Lines export through sockets that take a few bytes every half second, and another project's
job posting batches meanwhile. Before, each reader held a pooled connection for as long as it read (a server-side
cursor), so the pool ran dry and the ingest waited for the pool's timeout.
"""
import time

import httpx
import pytest
from django.db import connection

from ingest.models import Run
from tests.export_support import strict_lines
from tests.slow_reader_support import EVENTS, SlowReader, SmallBuffersServer, many_events

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

POOL_SIZE = 4
RESERVE = 2
READERS = 8  # twice the pool


@pytest.fixture
def small_pool(transactional_db, settings):
    """The server's pool (this process's) with POOL_SIZE connections, a short wait for one, RESERVE kept for writes."""
    pool = connection.settings_dict["OPTIONS"]["pool"]
    connection.close()
    connection.close_pool()
    connection.settings_dict["OPTIONS"]["pool"] = {**pool, "min_size": 1, "max_size": POOL_SIZE, "timeout": 5}
    settings.DATABASE_POOL_RESERVE = RESERVE
    yield POOL_SIZE
    connection.close()
    connection.close_pool()
    connection.settings_dict["OPTIONS"]["pool"] = pool


@pytest.fixture
def server(small_pool, settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    settings.DEBUG = False
    with SmallBuffersServer() as console:
        yield console


def test_another_projects_ingest_answers_within_a_second_while_more_readers_than_connections_trickle(
        server, project, other_project, token, other_token, sender, settings):
    settings.EXPORT_MAX_CONCURRENT_PER_PROJECT = 100  # here every reader streams: the pool alone is under test
    settings.EXPORT_MAX_CONCURRENT_PER_TOKEN = 100
    many_events(project, sender)
    ingest = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {other_token}"}, timeout=15)

    def post(step):
        started = time.monotonic()
        response = ingest.post("/api/v1/ingest", json={"run": {"id": "vision-1"}, "points": [
            {"step": step, "metric": "loss", "value": 2.0 - 0.001 * step}]})
        return response.status_code, time.monotonic() - started

    assert post(0)[0] == 202  # the first request of a server pays for its imports

    readers = [SlowReader(server.port, "/api/v1/projects/pretrain/export/?types=events", token) for _ in range(READERS)]
    for reader in readers:
        reader.start()
    for reader in readers:
        assert reader.started_reading.wait(30) and reader.error is None, reader.error
    time.sleep(1)  # every reader's stream is now blocked on its full socket

    answers = []
    for step in range(1, 11):
        answers.append(post(step))
        time.sleep(0.2)
    still_reading = [not r.ended_early and r.is_alive() for r in readers]

    for reader in readers:
        reader.hurry.set()
    for reader in readers:
        reader.join(120)
    ingest.close()

    slowest = max(seconds for _, seconds in answers)
    assert [status for status, _ in answers] == [202] * 10, answers
    assert slowest < 1.0, f"an ingest took {slowest:.2f} s while {READERS} exports trickled ({answers})"
    assert all(still_reading), "a reader's export ended before the ingest was measured: the test measured nothing"
    assert Run.objects.get(run_id="vision-1").last_step == 10
    for reader in readers:  # and each slow reader got the whole export, in order
        assert reader.error is None, reader.error
        lines = strict_lines(reader.body())
        assert [line["step"] for line in lines] == list(range(EVENTS))
