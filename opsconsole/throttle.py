"""Throttling of failed logins and bad API tokens: 429 with Retry-After once a key has failed too often.

Only failures count, so people and jobs that authenticate normally are never
throttled, however many share an address.

- Logins (the console's and the admin's): per user name and per address. A key
  that reaches its limit within the window is refused — even with the right
  password — until the window that began with its first failure ends.
- Bearer tokens (project and personal): per token, and per address counting
  distinct bad tokens, so one job retrying a revoked token blocks only that
  token, while an address trying many tokens gets 429 for every further token
  the console does not know. A token is looked up before these counts are read
  (ingest/auth.py), and a valid one is served whatever its address sent:
  behind a NAT or a proxy, or during a rotation, one misconfigured job must not
  stop the others' telemetry. Guessing stays hopeless: a token holds 256
  random bits, and past the limit every unknown one is refused. A valid token
  of the wrong kind for its endpoint is a mistake, not a guess, and is not
  counted.

Counts live in Django's cache (Redis with REDIS_URL, so every web process
shares them; per process embedded). A cache that is down lets requests
through (logged; opsconsole/breaker.py skips it meanwhile): a Redis outage
must not lock everyone out.
"""
from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from opsconsole import metrics
from opsconsole.breaker import Breaker

log = logging.getLogger(__name__)

PREFIX = "throttle:"
CACHE = Breaker("throttle: cache", logger=log)


def clock() -> float:
    return time.time()


def client_address(request) -> str:
    """The address failures are counted against: the client's IPv4 address, or its IPv6 /64 (one host's share)."""
    raw = request.META.get("REMOTE_ADDR") or "unknown"
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        return raw
    if address.version == 6:
        if address.ipv4_mapped:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _key(*parts: str) -> str:
    return PREFIX + hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:40]


@dataclass(frozen=True)
class Limit:
    key: str
    allowed: int  # failures within the window; the next attempt is refused


class Throttle:
    def __init__(self, scope: str):
        self.scope = scope

    @property
    def window(self) -> int:
        return settings.AUTH_FAILURE_WINDOW_SECONDS

    def wait(self, limits: list[Limit]) -> int:
        """Seconds until the first of `limits` reached lets attempts through again; 0 when none is reached."""
        def read():
            keys = [k for limit in limits for k in (limit.key, limit.key + ":since")]
            return cache.get_many(keys)

        stored = CACHE.call(read, errors=(Exception,), fallback={})
        now = clock()
        waits = []
        for limit in limits:
            count, since = stored.get(limit.key, 0), stored.get(limit.key + ":since")
            if since is not None and count >= limit.allowed and now < since + self.window:
                waits.append(math.ceil(since + self.window - now))
        if waits:
            log.warning("%s throttled for %d s", self.scope, max(waits))
            metrics.count("throttled_requests", scope=self.scope)
        return max(waits, default=0)

    def failed(self, keys: list[str]) -> None:
        """One more failure against each key (a window starts at a key's first failure)."""
        def count():
            now = clock()
            for key in keys:
                since = cache.get(key + ":since")
                if since is None or now >= since + self.window:
                    cache.set_many({key: 1, key + ":since": now}, timeout=self.window)
                    continue
                try:
                    cache.incr(key)
                except ValueError:  # expired just now
                    cache.set_many({key: 1, key + ":since": now}, timeout=self.window)

        CACHE.call(count, errors=(Exception,))

    def forget(self, keys: list[str]) -> None:
        CACHE.call(lambda: cache.delete_many([k for key in keys for k in (key, key + ":since")]), errors=(Exception,))


class LoginThrottle(Throttle):
    def limits(self, request, username: str) -> list[Limit]:
        return [
            Limit(_key(self.scope, "user", username.strip().casefold()), settings.LOGIN_FAILURES_PER_USER),
            Limit(_key(self.scope, "address", client_address(request)), settings.LOGIN_FAILURES_PER_ADDRESS),
        ]

    def wait_for(self, request, username: str) -> int:
        return self.wait(self.limits(request, username))

    def failure(self, request, username: str) -> None:
        self.failed([limit.key for limit in self.limits(request, username)])

    def success(self, request, username: str) -> None:
        # The user's own count starts again; the address's does not (one good account must not reset it).
        self.forget([self.limits(request, username)[0].key])


class TokenThrottle(Throttle):
    """Counts for tokens the console does not know (unknown or revoked): valid tokens are never counted or checked."""

    def limits(self, request, raw_token: str) -> list[Limit]:
        return [
            Limit(_key(self.scope, "token", raw_token), settings.TOKEN_FAILURES_PER_TOKEN),
            Limit(_key(self.scope, "address", client_address(request)), settings.TOKEN_FAILURES_PER_ADDRESS),
        ]

    def wait_for(self, request, raw_token: str) -> int:
        return self.wait(self.limits(request, raw_token))

    def failure(self, request, raw_token: str) -> None:
        token_limit, address_limit = self.limits(request, raw_token)
        seen = _key(self.scope, "seen", client_address(request), raw_token)
        # The address counts distinct bad tokens: a job repeating one revoked token is not a guesser.
        first_time = CACHE.call(lambda: cache.add(seen, 1, timeout=self.window), errors=(Exception,), fallback=False)
        self.failed([token_limit.key, address_limit.key] if first_time else [token_limit.key])


LOGINS = LoginThrottle("login")
TOKENS = TokenThrottle("token")


def reset() -> None:
    """Forget every count (between tests). Only this module's keys are removed from a shared Redis."""

    def forget_all():
        backend = getattr(cache, "_cache", None)
        if not hasattr(backend, "get_client"):
            return cache.clear()
        client = backend.get_client(write=True)
        keys = list(client.scan_iter(match=cache.make_key(PREFIX + "*"), count=1000))
        if keys:
            client.delete(*keys)

    CACHE.reset()
    CACHE.call(forget_all, errors=(Exception,))
    CACHE.reset()
