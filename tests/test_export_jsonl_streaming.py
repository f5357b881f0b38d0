"""A JSONL export is streamed: lines leave as they are read, in chunks, over WSGI and over ASGI (what uvicorn serves)."""
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from exports import jsonl
from ingest.models import Event, Run
from opsconsole import rest
from reviews.lifecycle import write_entry
from tests.export_support import body_of, strict_lines
from tests.factories import client_for

pytestmark = pytest.mark.django_db


def test_types_come_in_order_each_oldest_first(exported, owner):
    lines = strict_lines(body_of(client_for(owner).get("/api/v1/projects/pretrain/export/")))
    types = [line["type"] for line in lines]
    assert types == sorted(types, key=["alert", "incident", "event", "decision"].index)
    for kind, key in (("alert", "fired_at"), ("incident", "opened_at"), ("event", "time"), ("decision", "at")):
        times = [line[key] for line in lines if line["type"] == kind]
        assert times == sorted(times), kind
    assert [line["run"] for line in lines if line["type"] == "decision"] == ["exp/b", "exp-a"]  # written a day apart


def test_two_exports_of_the_same_data_are_the_same_bytes(exported, owner):
    client = client_for(owner)
    assert body_of(client.get("/api/v1/projects/pretrain/export/")) == body_of(client.get("/api/v1/projects/pretrain/export/"))


def test_the_first_line_leaves_before_the_later_types_are_read(exported, owner):
    response = client_for(owner).get("/api/v1/runs/exp-a/export/?format=jsonl")
    assert response.streaming and response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"] == 'attachment; filename="run-exp-a.jsonl"'
    content = iter(response.streaming_content)
    with CaptureQueriesContext(connection) as queries:
        first = next(content)
    assert strict_lines(first)[0]["type"] == "alert"
    read = " ".join(q["sql"] for q in queries.captured_queries)
    assert "ingest_event" not in read and "reviews_logentry" not in read
    rest_of_it = b"".join(content)
    assert rest_of_it.count(b"\n") == 5


def test_rows_are_read_a_chunk_at_a_time(exported, owner, project, monkeypatch):
    run = Run.objects.get(run_id="exp-a")
    for n in range(7):
        write_entry(run, by=owner, observation=f"note {n}", explanations=["x"], owner="Bob", now=timezone.now() + timedelta(seconds=n))
    monkeypatch.setattr(jsonl, "CHUNK", 2)
    response = client_for(owner).get("/api/v1/runs/exp-a/export/?types=decisions")
    with CaptureQueriesContext(connection) as queries:
        lines = strict_lines(body_of(response))
    assert len(lines) == 8
    # The entries' corrections are fetched once per chunk of 2: the entries are never all held at once.
    assert sum("corrects_id" in q["sql"] and " IN (" in q["sql"] for q in queries.captured_queries) == 4


def test_over_asgi_the_lines_are_handed_over_in_batches_not_read_whole(exported, owner, monkeypatch):
    monkeypatch.setattr(rest, "LINES_PER_HOP", 2)
    client = AsyncClient()

    async def fetch():
        await client.aforce_login(owner)
        response = await client.get("/api/v1/projects/pretrain/export/")
        assert response.status_code == 200 and response.is_async
        return [chunk async for chunk in response.streaming_content]

    chunks = async_to_sync(fetch)()
    lines = strict_lines(b"".join(chunks))
    assert len(chunks) == (len(lines) + 1) // 2 and all(chunk.count(b"\n") <= 2 for chunk in chunks)


def test_records_of_the_same_instant_across_chunks_are_each_written_once(exported, owner, monkeypatch):
    first = Event.objects.filter(run__run_id="exp-a").first()
    Event.objects.bulk_create([Event(run=first.run, attempt=first.attempt, step=100 + n, component=f"c{n}", condition="dead",
                                     magnitude=1.0, time=1_764_000_500.0, receipt=first.receipt) for n in range(5)])
    monkeypatch.setattr(jsonl, "CHUNK", 2)
    monkeypatch.setattr(jsonl, "SEGMENT", 2)  # the five share one time, and each query ends inside them
    lines = strict_lines(body_of(client_for(owner).get("/api/v1/runs/exp-a/export/?types=events")))
    assert [line["step"] for line in lines] == [7, 9, 100, 101, 102, 103, 104]

