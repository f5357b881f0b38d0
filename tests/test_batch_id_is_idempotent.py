"""A batch re-sent with the same batch_id is answered 200 duplicate and stored once — also under concurrency."""
import random
import threading

import httpx
import pytest

from ingest.models import BatchReceipt, Block, Run


def batch(index, run_id="idem", steps_per_batch=10, metrics=("loss", "grad_norm")):
    first = index * steps_per_batch
    return {
        "batch_id": f"job-1:{index:06d}",
        "run": {"id": run_id},
        "points": [
            {"step": s, "metric": m, "value": s * 0.5 + i}
            for s in range(first, first + steps_per_batch)
            for i, m in enumerate(metrics)
        ],
    }


@pytest.mark.django_db
def test_same_batch_id_twice_is_stored_once(sender):
    first = sender.post(batch(0))
    again = sender.post(batch(0))
    assert first.status_code == 202 and first.json()["duplicate"] is False
    assert again.status_code == 200
    assert again.json() == {"run": "idem", "accepted": {"points": 20, "events": 0, "phases": 0}, "duplicate": True, "actions": []}
    assert BatchReceipt.objects.count() == 1
    assert len(sender.get("/api/v1/runs/idem/points/", metric="loss", attempt="all").json()["points"]) == 10
    assert Run.objects.get().attempt == 1  # a duplicate is not a rewind


@pytest.mark.django_db
def test_same_batch_id_for_another_run_is_a_different_batch(sender):
    assert sender.post(batch(0, run_id="a")).status_code == 202
    assert sender.post(batch(0, run_id="b")).status_code == 202


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_eight_clients_resending_fifty_batches_three_times_store_every_point_once(live_server, token):
    batches = [batch(i, run_id="concurrent") for i in range(50)]
    work = [b for b in batches for _ in range(3)]  # each client sends every batch three times
    statuses = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def client(seed):
        mine = work[:]
        random.Random(seed).shuffle(mine)
        with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            start.wait()
            for body in mine:
                response = http.post("/api/v1/ingest", json=body)
                with lock:
                    statuses.append((response.status_code, response.json().get("duplicate")))

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(statuses) == 8 * 150
    assert all(code in (200, 202) for code, _ in statuses), statuses
    assert sum(1 for code, _ in statuses if code == 202) == len({b["batch_id"] for b in batches})
    assert BatchReceipt.objects.count() == 50
    run = Run.objects.get(run_id="concurrent")
    assert run.attempt == 1
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        for metric in ("loss", "grad_norm"):
            points = http.get("/api/v1/runs/concurrent/points/", params={"metric": metric, "attempt": "all"}).json()["points"]
            assert [p["step"] for p in points] == list(range(500))
    assert sum(Block.objects.values_list("count", flat=True)) == 1000
