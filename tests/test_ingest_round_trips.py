"""A batch of a run already known costs PostgreSQL the same few round trips however many series it holds:
the lock, the run, the receipt and the run's series travel together, and so do the statements nobody reads
(ingest/service.py). Counted on the wire, from libpq's trace of the messages both ways: a round trip is the
client sending and then waiting for the server's answer. Each one costs a batch a network latency under its
run's lock."""
import tempfile

import orjson
import pytest
from django.db import connection
from psycopg import pq

from ingest.contract import parse_json_batch
from ingest.service import ingest_batch

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _batch(run, start, series):
    points = [{"step": step, "metric": f"m{i}", "component": "gpu0", "value": 1.0}
              for step in range(start, start + 10) for i in range(series)]
    return parse_json_batch(orjson.dumps({"run": {"id": run}, "batch_id": f"{run}-{start}", "points": points}))


def _round_trips(project, batch):
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            ingest_batch(project, batch)
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines = trace.read().splitlines()
    # Each message is a line opened by its direction (a statement's own line breaks continue it).
    directions = [line[0] for line in lines if line[:2] in ("F\t", "B\t")]
    # A round trip: the client sends, then waits for what the server answers.
    return sum(1 for sent, answered in zip(directions, directions[1:]) if sent == "F" and answered == "B")


def test_a_known_runs_batch_costs_a_fixed_number_of_round_trips(project, monkeypatch):
    # What the commit sets off (the batch's evaluation, eager in tests) is not the batch's storing.
    monkeypatch.setattr("ingest.service.announce_batch_stored", lambda receipt_id: None)
    trips = {}
    for series in (3, 40):
        run = f"trips-{series}"
        ingest_batch(project, _batch(run, 0, series))
        trips[series] = _round_trips(project, _batch(run, 10, series))
    # BEGIN; the lock, the run, the receipt and the series; COPY's two; the progress and the rollups; COMMIT.
    assert trips == {3: 6, 40: 6}
