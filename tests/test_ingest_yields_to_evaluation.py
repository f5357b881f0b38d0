"""Ingest yields to evaluation (ingest/pacing.py): while a project's oldest batch not yet judged is older than
EVALUATION_PACE_AFTER_MS, its ingest answers are held back by the excess (at most EVALUATION_PACE_MAX_MS),
after the batch is stored. A project that keeps up, or another project, is not held."""
import asyncio
import time
from datetime import timedelta

import httpx
import orjson
import pytest
from django.utils import timezone

from alerts import tasks
from ingest import pacing
from ingest.models import BatchReceipt, Block


@pytest.fixture(autouse=True)
def _nothing_judged(monkeypatch, settings):
    # Nothing judged as it is stored: the batches wait, as they do behind busy workers.
    monkeypatch.setattr(tasks, "queue_evaluation", lambda receipt_id, **kwargs: True)
    monkeypatch.setattr(pacing, "PACE_CHECK_SECONDS", 0.0)
    settings.EVALUATION_PACE_AFTER_MS = 1000
    settings.EVALUATION_PACE_MAX_MS = 1000
    pacing.forget()
    yield
    pacing.forget()


def _body(run, start):
    return {"run": {"id": run}, "points": [{"step": s, "metric": "loss", "value": 1.0} for s in range(start, start + 5)]}


def _received(seconds_ago):
    BatchReceipt.objects.update(received_at=timezone.now() - timedelta(seconds=seconds_ago))


@pytest.mark.django_db
def test_a_project_behind_is_held_by_how_far_it_is_behind(sender, project, other_project, settings):
    assert sender.post(_body("behind", 0)).status_code == 202
    _received(30)
    assert pacing.evaluation_pace(project.pk) == 0.0  # one batch waiting: behind others', not running ahead
    assert sender.post(_body("behind", 5)).status_code == 202
    _received(0)
    assert pacing.evaluation_pace(project.pk) == 0.0  # just received: evaluation is not behind yet

    _received(1.4)
    assert 0.35 < pacing.evaluation_pace(project.pk) < 0.5
    _received(20)
    assert pacing.evaluation_pace(project.pk) == 1.0  # never more than EVALUATION_PACE_MAX_MS
    assert pacing.evaluation_pace(other_project.pk) == 0.0  # another project keeps its answers
    _received(pacing.PACE_GIVE_UP_SECONDS + 5)
    assert pacing.evaluation_pace(project.pk) == 0.0  # stopped, not behind: holding answers would not help
    _received(20)

    settings.EVALUATION_PACE_AFTER_MS = 0
    assert pacing.evaluation_pace(project.pk) == 0.0  # turned off

    settings.EVALUATION_PACE_AFTER_MS = 1000
    BatchReceipt.objects.update(evaluated_at=timezone.now())
    assert pacing.evaluation_pace(project.pk) == 0.0  # caught up: answers come at once again


@pytest.mark.django_db(transaction=True)
def test_the_held_answer_comes_after_its_batch_is_stored(sender, token, project, settings):
    from opsconsole.asgi import application

    settings.EVALUATION_PACE_MAX_MS = 600
    assert sender.post(_body("held", 0)).status_code == 202
    assert sender.post(_body("held", 5)).status_code == 202
    _received(20)

    async def post():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            started = time.monotonic()
            answer = await client.post("/api/v1/ingest", content=orjson.dumps(_body("held", 10)),
                                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            return answer, time.monotonic() - started

    answer, took = asyncio.run(post())
    assert answer.status_code == 202 and answer.json()["accepted"]["points"] == 5
    assert took >= 0.6
    assert Block.objects.filter(series__run__run_id="held").count() == 3  # every batch stored, nothing refused


@pytest.mark.django_db
def test_a_project_waiting_behind_another_projects_flood_is_not_held(sender, project, other_project, other_token):
    for start in range(0, 20, 5):  # the flood
        assert sender.post(_body("flood", start)).status_code == 202
    assert sender.post(_body("quiet", 0), token=other_token).status_code == 202
    _received(5)
    assert pacing.evaluation_pace(project.pk) == 1.0
    assert pacing.evaluation_pace(other_project.pk) == 0.0


@pytest.mark.django_db
def test_a_backlog_that_cannot_be_read_holds_nothing_and_keeps_the_answer(sender, monkeypatch):
    from django.db import OperationalError

    def database_gone(*args, **kwargs):
        raise OperationalError("the server closed the connection")

    assert sender.post(_body("gone", 0)).status_code == 202
    monkeypatch.setattr(pacing.BatchReceipt.objects, "filter", database_gone)
    answer = sender.post(_body("gone", 5))
    assert answer.status_code == 202 and answer.json()["accepted"]["points"] == 5
    assert not getattr(answer, "hold_seconds", 0)
