"""Database connections that PostgreSQL dropped (a restart, a failover, `pg_terminate_backend`).

The pool checks each connection as it hands it out (`CONN_HEALTH_CHECKS`,
opsconsole/env.py), so a request that checks one out gets a live one. What is
left is a connection that dies while held: a worker keeps its connection from
task to task (checked here before each task instead), and any connection can
die mid-request. Work that is safe to repeat — a read-only request, an
idempotent task — runs once more on a fresh connection; anything else fails
as before.
"""
import logging

from asgiref.sync import iscoroutinefunction
from django.db import InterfaceError, OperationalError, connections

log = logging.getLogger(__name__)

LOST = (OperationalError, InterfaceError)
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def _open_connections():
    return [c for c in connections.all(initialized_only=True) if c.connection is not None]


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
        if any(c.in_atomic_block for c in connections.all(initialized_only=True)):
            raise  # the caller's transaction is lost with it: not ours to repeat
        log.warning("database connection lost (%s: %s); running %s once more on a fresh connection",
                    type(exc).__name__, str(exc).strip(), getattr(fn, "__name__", fn))
        for conn in connections.all(initialized_only=True):
            conn.close()
        return fn(*args, **kwargs)


class RetryReadsMiddleware:
    """A read-only request whose database connection was lost is answered once more on a fresh connection.

    Last in MIDDLEWARE: its process_view calls the view itself, so no other view middleware comes after it.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view, view_args, view_kwargs):
        if request.method not in SAFE_METHODS or iscoroutinefunction(view):
            return None
        return once_more_if_connection_lost(view, request, *view_args, **view_kwargs)
