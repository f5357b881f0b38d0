"""close() at the end of a job, while the console's database restarts (503 with Retry-After): the last batch is
tried again after the Retry-After, as a 503 is during the job, and reaches the console instead of the spool;
close() still returns by its deadline, spooling what it could not send by then. A console that cannot be
reached at all is not waited for."""
import time

from tests.client.support import Proxy, closed_port, read_points

import warninglight  # noqa: E402  (tests.client.support puts client/ on the path)

# Nothing leaves before close(): its flush is the one that meets the 503s.
AT_CLOSE = {"flush_seconds": 3600, "backoff": 0.05, "code_rev": False}


def log_steps(wl, n=10):
    for step in range(n):
        wl.log(step, loss=float(step))


def test_close_retries_a_503_after_its_retry_after_and_spools_nothing(console_server, token, tmp_path):
    with Proxy(console_server.port) as proxy:
        proxy.unavailable = 2  # the console's database is restarting: 503, Retry-After: 1
        wl = warninglight.watch(run_id="closing-db-restart", url=proxy.url, token=token, spool_dir=tmp_path, **AT_CLOSE)
        log_steps(wl)
        started = time.monotonic()
        wl.close()
        took = time.monotonic() - started
    batch_id = proxy.requests[0][0]
    assert proxy.requests == [(batch_id, 11, 503), (batch_id, 11, 503), (batch_id, 11, 202)]  # one batch, tried again
    assert 2.0 <= took < 10.0  # it waited the Retry-After each time, within close()'s 10 s
    assert wl.stats["retries"] == 2 and wl.stats["spooled"] == 0 and wl.spool_path is None
    assert [p["step"] for p in read_points(token, "closing-db-restart", "loss")] == list(range(10))


def test_close_keeps_its_deadline_and_spools_what_it_could_not_send(console_server, token, tmp_path):
    with Proxy(console_server.port) as proxy:
        proxy.unavailable = 1000  # still restarting when the job ends
        wl = warninglight.watch(run_id="closing-still-down", url=proxy.url, token=token, spool_dir=tmp_path, timeout=1.0,
                                **AT_CLOSE)
        log_steps(wl)
        started = time.monotonic()
        wl.close(flush_timeout=3.5)
        took = time.monotonic() - started
        tried = list(proxy.requests)
    # Tried at 0, 1 and 2 s: a try at 3 s could not end (its 1-s timeout) before the 3.5-s deadline.
    assert [status for _, _, status in tried] == [503, 503, 503] and len({b for b, _, _ in tried}) == 1
    assert took < 3.5
    assert wl.stats["spooled"] == 10 and wl.spool_path.exists()


def test_close_spools_at_once_when_the_retry_after_is_past_its_deadline(console_server, token, tmp_path):
    with Proxy(console_server.port) as proxy:
        proxy.unavailable = 1000
        proxy.retry_after = "120"
        wl = warninglight.watch(run_id="closing-long-restart", url=proxy.url, token=token, spool_dir=tmp_path, **AT_CLOSE)
        log_steps(wl)
        started = time.monotonic()
        wl.close()
        took = time.monotonic() - started
    assert len(proxy.requests) == 1 and took < 2.0
    assert wl.stats["spooled"] == 10


def test_close_does_not_wait_for_a_console_that_cannot_be_reached(tmp_path):
    wl = warninglight.watch(run_id="closing-unreachable", url=f"http://127.0.0.1:{closed_port()}", token="wl_x",
                            spool_dir=tmp_path, **AT_CLOSE)
    log_steps(wl)
    started = time.monotonic()
    wl.close()
    assert time.monotonic() - started < 1.0
    assert wl.stats["spooled"] == 10 and wl.stats["retries"] == 0
