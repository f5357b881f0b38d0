import threading, time
import pytest
from django.db import connection
from tests.backtest_support import draft, loss_curve, send_in_batches, URL
from tests.factories import client_for
from tests.worker_support import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_measure(celery_worker, sender, owner, project):
    loss = loss_curve(40_000)
    send_in_batches(sender, "big", {("loss", ""): loss}, size=500)
    with celery_worker(BACKTEST_MAX_POINTS=25_000) as worker:
        out = []
        def one():
            c = client_for(owner)
            t = time.monotonic()
            r = c.post(URL, draft(), content_type="application/json")
            out.append((r.status_code, time.monotonic() - t, r.get("Location"), r.json()))
            connection.close()
        threads = [threading.Thread(target=one) for _ in range(8)]
        began = time.monotonic()
        for t in threads: t.start()
        for t in threads: t.join()
        print("\nstatuses", sorted(s for s, *_ in out), "max answer s", round(max(d for _, d, *_ in out), 3))
        print("429 message:", [j for s, _, _, j in out if s == 429][:1])
        urls = [u for s, _, u, _ in out if s == 202]
        ends = lambda: all(client_for(owner).get(u).json()["state"] in ("done", "cut", "failed") for u in urls)
        assert wait_until(ends, 120, 0.2)
        print("both finished after", round(time.monotonic() - began, 2), "s")
        for u in urls:
            j = client_for(owner).get(u).json()
            print(j["state"], j["result"]["cut"]["message"] if j["result"]["cut"] else None)
