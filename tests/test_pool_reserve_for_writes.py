"""Reads cannot take the whole database pool: DATABASE_POOL_RESERVE connections stay for ingest and other writes.

And a request that waited the pool's whole timeout for a connection is not made to wait it once more.
"""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from opsconsole import db
from tests.worker_support import wait_until

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def pool_of(transactional_db, settings):
    """Sets this process's pool to `size` connections (a `timeout`-second wait for one), `reserve` kept for writes."""
    saved = connection.settings_dict["OPTIONS"]["pool"]

    def resize(size, reserve, timeout=5):
        connection.close()
        connection.close_pool()
        connection.settings_dict["OPTIONS"]["pool"] = {**saved, "min_size": 1, "max_size": size, "timeout": timeout}
        settings.DATABASE_POOL_RESERVE = reserve

    yield resize
    connection.close()
    connection.close_pool()
    connection.settings_dict["OPTIONS"]["pool"] = saved


class LongRead(threading.Thread):
    """A read that holds its connection until told to end (a long report, an export's chunk)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.reading = threading.Event()
        self.end = threading.Event()

    def run(self):
        try:
            with db.read_share():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")
                self.reading.set()
                self.end.wait(60)
        finally:
            connection.close()


@pytest.mark.postgres
def test_reads_holding_their_share_leave_ingest_a_connection(pool_of, monkeypatch, token, other_token):
    pool_of(size=3, reserve=1)
    monkeypatch.setattr(db, "READ_WAIT_SECONDS", 1.0)
    reads = [LongRead() for _ in range(2)]
    for read in reads:
        read.start()
        assert read.reading.wait(30)
    web = Client(raise_request_exception=False)

    started = time.monotonic()
    refused = web.get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert refused.status_code == 503 and refused["Retry-After"] == "5"
    assert "busy with other reads" in refused.json()["errors"][0]["message"]
    ingest = web.post("/api/v1/ingest", {"run": {"id": "writes"}, "points": [{"step": 0, "metric": "loss", "value": 1.0}]},
                      content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {other_token}")
    assert ingest.status_code == 202, ingest.content
    assert time.monotonic() - started < 4.5  # the read waited its second; the write never waited the pool's 5

    for read in reads:
        read.end.set()
        read.join(30)
    assert web.get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


@pytest.mark.postgres
def test_a_read_that_waited_the_pools_timeout_is_answered_without_waiting_it_twice(pool_of, token):
    pool_of(size=2, reserve=0, timeout=3)
    connection.pool.open()
    taken = [connection.pool.getconn() for _ in range(2)]  # the whole pool, held elsewhere
    try:
        started = time.monotonic()
        response = Client(raise_request_exception=False).get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {token}")
        waited = time.monotonic() - started
    finally:
        for conn in taken:
            connection.pool.putconn(conn)
    assert response.status_code == 503 and response["Retry-After"]  # a pool with nothing to give: try again soon
    assert 2.5 < waited < 5.5, f"waited {waited:.1f} s for a pool whose timeout is 3 s"  # before: 6 s, the wait repeated
    assert wait_until(lambda: Client().get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200, 10)


def start(env, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DATABASE_POOL_SIZE",
                                                               "DATABASE_POOL_RESERVE"}},
           "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "WL_VAR_DIR": str(tmp_path), "SECRET_KEY": "k",
           "ALLOWED_HOSTS": "h", "DATABASE_URL": "postgres://u@db.example:5432/wl", **env}
    code = "import django; django.setup(); from django.conf import settings; print(getattr(settings, 'DATABASE_POOL_RESERVE', 'unset'))"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("size, reserve", [("10", "3"), ("4", "1"), ("2", "1"), ("1", "0")])
def test_the_reserve_is_a_third_of_the_pool_by_default_and_leaves_reads_one(size, reserve, tmp_path):
    result = start({"DATABASE_POOL_SIZE": size}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [reserve]


@pytest.mark.parametrize("reserve", ["4", "-1", "some"])
def test_a_reserve_that_leaves_reads_nothing_stops_the_start(reserve, tmp_path):
    result = start({"DATABASE_POOL_SIZE": "4", "DATABASE_POOL_RESERVE": reserve}, tmp_path)
    assert result.returncode != 0
    assert "DATABASE_POOL_RESERVE" in result.stderr
