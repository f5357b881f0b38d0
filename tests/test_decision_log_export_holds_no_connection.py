"""The decision log's JSONL export (`/api/v1/decisions/?format=jsonl`) is read by whoever asks, at their pace: while
a slow reader has taken only the first lines, no server-side cursor stays open on the database, so slow readers
cannot hold the pool's connections from everyone's ingest (issue 21; the project exports do the same)."""
from datetime import timedelta

import orjson
import pytest
from django.db import connection
from django.utils import timezone

from ingest.models import Run
from reviews.log import entries_for, jsonl_lines
from reviews.models import LogEntry

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def open_cursors():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_cursors")
        return cursor.fetchone()[0]


def test_a_reader_that_stops_after_the_first_line_leaves_no_cursor_open(project, owner):
    run = Run.objects.create(project=project, run_id="r-log", max_step=100)
    start = timezone.now() - timedelta(hours=1)
    LogEntry.objects.bulk_create(
        LogEntry(project=project, run=run, observation=f"note {i}", explanations=["x"], owner="On-call",
                 at=start + timedelta(seconds=i // 3), step=i) for i in range(1_300))
    lines = jsonl_lines(entries_for(owner, project=project.slug))
    first = orjson.loads(next(lines))
    assert first["observation"] == "note 0"
    assert open_cursors() == 0  # the reader pauses here, as long as it likes
    rest = [orjson.loads(line)["observation"] for line in lines]
    # Every entry once, in order, across the segments' boundaries (entries share their `at` three by three).
    assert ["note 0", *rest] == [f"note {i}" for i in range(1_300)]
