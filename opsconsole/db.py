"""Database connections that PostgreSQL dropped (a restart, a failover, `pg_terminate_backend`).

The pool checks each connection as it hands it out (`CONN_HEALTH_CHECKS`,
opsconsole/env.py), so a request that checks one out gets a live one. What is
left is a connection that dies while held: a worker keeps its connection from
task to task (checked here before each task instead), and any connection can
die mid-request. Work that is safe to repeat — a read-only request, an
idempotent task — runs once more on a fresh connection; anything else fails
as before. A wait for the pool that timed out is no lost connection: it is not
repeated (that made a blocked request wait twice the pool's timeout).

Reads cannot take the whole pool. Writes — ingest above all — keep
DATABASE_POOL_RESERVE of the pool's connections: every read-only request
(RetryReadsMiddleware) and every chunk of a streamed export (exports/jsonl.py)
runs inside `read_share()`, which lets at most the pool's size less that
reserve run at once in this process (the pool is per process too). A read
waiting for its turn holds no connection, and gives back the one it used
when done, so a slow export reader holds none while it reads.
"""
import logging
import threading
from contextlib import contextmanager

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from django.http import JsonResponse

log = logging.getLogger(__name__)

LOST = (OperationalError, InterfaceError)
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# How long a read waits for its share before it is refused: the pool's own default wait for a connection.
READ_WAIT_SECONDS = 30.0
RETRY_AFTER_SECONDS = 5


def _pool_timed_out(exc) -> bool:
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # the embedded console, on SQLite, has no pool
        return False
    return isinstance(exc.__cause__, PoolTimeout)


def _open_connections():
    return [c for c in connections.all(initialized_only=True) if c.connection is not None]


# SQLSTATE classes of a database that cannot answer now but will shortly: connection exceptions (08), operator
# intervention (57: shutting down, starting up, the session terminated), insufficient resources (53: too many
# connections), transaction rollback (40: deadlock, serialization).
UNAVAILABLE_SQLSTATE_CLASSES = {"08", "57", "53", "40"}


def database_unavailable(exc: BaseException) -> bool:
    """True for an error that says "the database is down, restarting or busy: ask again shortly" (a 503, not a 500)."""
    if isinstance(exc, InterfaceError):
        return True  # the connection was closed under us
    if not isinstance(exc, OperationalError):
        return False
    if _pool_timed_out(exc):
        return True  # no connection could be had: the database is down or every connection is busy
    cause = exc.__cause__
    try:
        import sqlite3
    except ImportError:  # pragma: no cover - CPython always has it
        sqlite3 = None
    if sqlite3 is not None and isinstance(cause, sqlite3.Error):
        return "locked" in str(cause) or "busy" in str(cause)  # not "no such table": that is a bug, a 500
    sqlstate = getattr(cause, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in UNAVAILABLE_SQLSTATE_CLASSES  # None: no server answered at all


def database_unavailable_response(exc: BaseException) -> JsonResponse:
    log.warning("database unavailable: %s: %s", type(exc).__name__, str(exc).strip())
    return JsonResponse({"errors": [{"path": "", "message": "the database is unavailable (down or restarting): "
                                                          "retry shortly"}]},
                        status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def drop_dead_connections() -> None:
    """Close this thread's connections that no longer answer; the next query takes a checked one from the pool."""
    for conn in _open_connections():
        if not conn.in_atomic_block and not conn.is_usable():
            conn.close()  # back to the pool, which discards a broken connection


def once_more_if_connection_lost(fn, *args, **kwargs):
    """fn(*args, **kwargs), run a second time if the database connection was lost; only for work safe to repeat."""
    try:
        return fn(*args, **kwargs)
    except LOST as exc:
        if _pool_timed_out(exc):
            raise  # every connection is busy: waiting as long once more would only double the wait
        if any(c.in_atomic_block for c in connections.all(initialized_only=True)):
            raise  # the caller's transaction is lost with it: not ours to repeat
        log.warning("database connection lost (%s: %s); running %s once more on a fresh connection",
                    type(exc).__name__, str(exc).strip(), getattr(fn, "__name__", fn))
        for conn in connections.all(initialized_only=True):
            conn.close()
        return fn(*args, **kwargs)


def give_back_connections() -> None:
    """Return this thread's connections to the pool (those outside a transaction): the next query takes one again."""
    for conn in _open_connections():
        if not conn.in_atomic_block and getattr(conn, "pool", None) is not None:
            conn.close()


class ReadsBusy(Exception):
    """The reads' share of the pool stayed taken for READ_WAIT_SECONDS."""


class ReadShare:
    """At most the pool's size less DATABASE_POOL_RESERVE reads at once in this process; no limit without a pool."""

    def __init__(self):
        self._lock = threading.Lock()
        self._limit = None
        self._semaphore = None
        self._depth = threading.local()

    def limit(self) -> int | None:
        pool = connections["default"].settings_dict.get("OPTIONS", {}).get("pool")
        if not pool:
            return None
        # psycopg_pool's own default size is 4 (`"pool": True`); the console always names one (opsconsole/env.py).
        size = (pool.get("max_size") or pool.get("min_size", 4)) if isinstance(pool, dict) else 4
        return max(1, size - settings.DATABASE_POOL_RESERVE)

    def semaphore(self, limit: int) -> threading.BoundedSemaphore:
        with self._lock:
            if self._limit != limit:  # only when the settings change (tests), never while reads hold it
                self._limit, self._semaphore = limit, threading.BoundedSemaphore(limit)
            return self._semaphore

    @contextmanager
    def __call__(self, wait: float | None = None):
        depth = getattr(self._depth, "n", 0)
        limit = None if depth else self.limit()
        if limit is None:  # nested in a read of this thread, which holds the turn already; or no pool
            self._depth.n = depth + 1
            try:
                yield
            finally:
                self._depth.n = depth
            return
        turn = self.semaphore(limit)
        give_back_connections()  # a connection held while waiting would be taken from the writes
        wait = READ_WAIT_SECONDS if wait is None else wait
        if not turn.acquire(timeout=wait):
            raise ReadsBusy(f"{limit} reads held the database for {wait:.0f} s")
        self._depth.n = 1
        try:
            yield
        finally:
            self._depth.n = 0
            give_back_connections()
            turn.release()


read_share = ReadShare()


def reads_busy_response(exc: ReadsBusy) -> JsonResponse:
    log.warning("read refused: %s", exc)
    return JsonResponse({"errors": [{"path": "", "message": "the database is busy with other reads; retry shortly"}]},
                        status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


class RetryReadsMiddleware:
    """A read-only request runs in the reads' share of the pool, and once more on a fresh connection if its own was lost.

    Last in MIDDLEWARE: its process_view calls the view itself, so no other view middleware comes after it.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view, view_args, view_kwargs):
        if request.method not in SAFE_METHODS or iscoroutinefunction(view):
            return None
        try:
            with read_share():
                response = once_more_if_connection_lost(view, request, *view_args, **view_kwargs)
                # Rendered here, not after this returns, so that a page's lazy queries run in the reads' share too.
                if callable(getattr(response, "render", None)):
                    response = response.render()
                return response
        except ReadsBusy as exc:
            return reads_busy_response(exc)
