"""Served by uvicorn, requests one after another run on a kept thread or two (Django starts two threads a request:
a measured share of every ingest batch, docs/benchmarks.md), while requests at the same time still each get a
thread of their own, and a thread a gone client left busy is never handed to the next request."""
import threading

import httpx
import pytest
from django.core.signals import request_started


pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def request_threads():
    """The thread each request's synchronous code started on, in order; a test may add a hold."""
    seen = []
    holds = []

    def started(**kwargs):
        seen.append(threading.get_ident())
        for hold in holds:
            hold()

    request_started.connect(started, dispatch_uid="test-request-threads")
    yield seen, holds
    request_started.disconnect(dispatch_uid="test-request-threads")


def test_requests_one_after_another_share_kept_threads(console_server, request_threads):
    seen, _ = request_threads
    with httpx.Client(base_url=console_server.url, timeout=10) as http:
        for _ in range(4):
            assert http.get("/healthz").status_code == 200
        for _ in range(16):
            assert http.get("/healthz").status_code == 200
    # A request's thread is given back once its response is closed, which may be just after the next request
    # came in: two threads (at times three) taking turns. Django's own handler: twenty requests, twenty threads.
    assert len(seen) == 20 and len(set(seen)) <= 4


def test_requests_at_the_same_time_get_a_thread_each(console_server, request_threads):
    seen, holds = request_threads
    both_in = threading.Barrier(2, timeout=5)  # on one thread, the second request could never arrive: BrokenBarrierError
    holds.append(both_in.wait)
    answers = []

    def get():
        with httpx.Client(base_url=console_server.url, timeout=10) as http:
            answers.append(http.get("/healthz").status_code)

    clients = [threading.Thread(target=get) for _ in range(2)]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    assert answers == [200, 200] and len(set(seen)) == 2


def test_a_request_thread_knows_when_its_work_is_done():
    from opsconsole.handler import _RequestThread

    thread, go = _RequestThread(), threading.Event()
    try:
        assert thread.idle
        running = thread.submit(go.wait, 5)
        queued = thread.submit(lambda: None)
        assert not thread.idle  # so the handler would not give it to the next request
        go.set()
        running.result(5), queued.result(5)
        assert thread.idle
    finally:
        thread.shutdown()


def test_a_request_left_hanging_by_a_gone_client_does_not_hold_up_the_next(console_server, request_threads):
    seen, holds = request_threads
    release = threading.Event()

    def first_request_hangs():
        if len(seen) == 1:
            release.wait(10)

    holds.append(first_request_hangs)
    with httpx.Client(base_url=console_server.url, timeout=1) as http, pytest.raises(httpx.ReadTimeout):
        http.get("/healthz")  # the client gives up and goes; the request's code is still waiting
    try:
        with httpx.Client(base_url=console_server.url, timeout=5) as http:
            assert http.get("/healthz").status_code == 200  # behind the busy thread it would time out
    finally:
        release.set()
    assert len(seen) == 2 and seen[0] != seen[1]
