"""With PostgreSQL, Redis and a real Celery worker: starting a backtest answers at once (the replay is the worker's,
not the web request's), the worker finishes it, and two workers taking the same job replay it once."""
import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from alerts import backtest_jobs
from alerts.models import BacktestJob, BacktestState
from tests.backtest_support import draft, post
from tests.factories import client_for
from tests.worker_support import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_the_request_answers_at_once_and_the_worker_replays(runs, celery_worker, owner):
    with celery_worker() as worker:
        began = time.monotonic()
        response = post(owner, draft())
        answered_in = time.monotonic() - began
        assert response.status_code == 202 and response.json()["state"] in ("queued", "running"), response.content
        assert answered_in < 5  # generous: what matters is that the 202 did not wait for the replay
        url = response["Location"]
        done = lambda: client_for(owner).get(url).json()["state"] == "done"
        assert wait_until(done, timeout=60), worker.output()[-3000:]
    result = client_for(owner).get(url).json()["result"]
    assert (result["alerts"], result["cut"]) == (2, None)
    assert "alerts.tasks.run_backtest" in worker.output()


def test_two_workers_taking_one_job_replay_it_once(transactional_db, runs, owner, project, monkeypatch):
    job = BacktestJob.objects.create(project=project, started_by=owner, created_at=timezone.now(),
                                     draft={k: v for k, v in draft().items() if k != "project"}, run_ids=["calm"])
    replays, taken = [], []
    real = backtest_jobs.backtest.backtest
    monkeypatch.setattr(backtest_jobs.backtest, "backtest", lambda *a, **k: replays.append(1) or real(*a, **k))
    start = threading.Barrier(2)

    def worker():
        try:
            start.wait()
            taken.append(backtest_jobs.run(job.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(taken) == [False, True] and len(replays) == 1
    assert BacktestJob.objects.get(pk=job.pk).state == BacktestState.DONE
