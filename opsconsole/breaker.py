"""A small circuit breaker for the optional services a request touches (the Celery broker, the channel layer, the cache).

When Redis is down, every ingest must not pay a connection attempt: after a
failure the breaker is open and callers skip the service for a back-off that
doubles with each failed probe (up to a cap); when it ends, one caller probes
while the others keep skipping, and a success closes it. State is per process:
each web or worker process finds out on its own, with one failed call.
"""
from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)


class Breaker:
    clock = staticmethod(time.monotonic)

    def __init__(self, name: str, *, first_wait: float = 5.0, max_wait: float = 60.0, logger: logging.Logger = log):
        self.name = name
        self.log = logger
        self.first_wait = first_wait
        self.max_wait = max_wait
        self._lock = threading.Lock()
        self._failures = 0  # consecutive failed calls
        self._open_until = 0.0
        self._probing = False
        self.attempts = 0  # calls let through, for the benchmark and the logs
        self.skipped = 0

    @property
    def is_open(self) -> bool:
        return self._failures > 0

    def _allow(self) -> bool:
        with self._lock:
            if self._failures and (self._probing or self.clock() < self._open_until):
                self.skipped += 1
                return False
            self._probing = self._failures > 0
            self.attempts += 1
            return True

    def _done(self, error: BaseException | None) -> None:
        with self._lock:
            self._probing = False
            if error is None:
                if self._failures:
                    self.log.warning("%s: reachable again", self.name)
                self._failures = 0
                return
            self._failures += 1
            wait = min(self.max_wait, self.first_wait * 2 ** (self._failures - 1))
            self._open_until = self.clock() + wait
        self.log.warning("%s: unreachable (%s: %s); not tried again for %.0f s", self.name, type(error).__name__, error, wait)

    def call(self, fn, *, errors, fallback=None, force: bool = False):
        """fn()'s result, or `fallback` when the breaker is open or fn raises one of `errors` (which opens it).

        `force` tries even while open (a caller that knows the service is back, e.g. a worker that has just
        received a message from the broker); its outcome updates the breaker as any call does.
        """
        if force:
            with self._lock:
                self.attempts += 1
        elif not self._allow():
            return fallback
        try:
            result = fn()
        except errors as exc:
            self._done(exc)
            return fallback
        except BaseException:
            with self._lock:
                self._probing = False
            raise
        self._done(None)
        return result

    def reset(self) -> None:
        with self._lock:
            self._failures, self._open_until, self._probing = 0, 0.0, False
