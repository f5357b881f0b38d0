"""Typed readers for settings that come from the environment.

Every reader fails at start-up with the variable's name and the bad value, so a
typo in a deployment is a crash on boot rather than a console that quietly runs
with a default.
"""
import os
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name, default=None):
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name, default, *, minimum=None):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_url(name, default):
    """An http(s) base URL, without a trailing slash."""
    raw = os.environ.get(name, default)
    parsed = urlparse(raw)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an http(s)://host[:port] URL")
    return raw.rstrip("/")


def env_list(name, default=()):
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(name, url):
    """Django DATABASES entry for postgres:// or sqlite:// URLs; anything else is refused."""
    import dj_database_url

    scheme = urlparse(url).scheme
    if scheme not in {"postgres", "postgresql", "pgsql", "sqlite"}:
        raise ImproperlyConfigured(
            f"{name}={url!r}: unsupported scheme {scheme!r} (use postgres://… or sqlite:////absolute/path.db)"
        )
    try:
        config = dj_database_url.parse(url)
    except Exception as exc:  # the library raises several types for a malformed URL
        raise ImproperlyConfigured(f"{name}={url!r} is not a valid database URL: {exc}") from None
    if scheme == "sqlite":
        if not config.get("NAME") or config["NAME"] == ":memory:":
            raise ImproperlyConfigured(f"{name}={url!r}: give a file path, e.g. sqlite:////abs/path.db")
        config["OPTIONS"] = sqlite_options()
    elif not config.get("NAME"):
        raise ImproperlyConfigured(f"{name}={url!r}: the URL names no database")
    else:
        # Under ASGI every request runs its sync code in a fresh thread, and Django's
        # connections are per thread: without a pool each request would open a new
        # PostgreSQL connection (measured: ~25 ms of a 5,000-point batch).
        config["CONN_MAX_AGE"] = 0
        # Django's backend with a pool that checks each connection it hands out, so the ones PostgreSQL
        # dropped (restart, failover) are replaced instead of failing requests (opsconsole/postgresql).
        config["ENGINE"] = "opsconsole.postgresql"
        config["OPTIONS"] = {**config.get("OPTIONS", {}), "pool": {"min_size": 2, "max_size": env_int("DATABASE_POOL_SIZE", 10, minimum=1)}}
    return config


def sqlite_options():
    # IMMEDIATE takes the write lock when a transaction starts, so two concurrent
    # ingests queue up instead of failing with "database is locked" mid-batch.
    return {"transaction_mode": "IMMEDIATE", "timeout": 30}


def redis_url(name):
    url = os.environ.get(name)
    if url is None or url == "":
        return None
    scheme = urlparse(url).scheme
    if scheme not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured(f"{name}={url!r}: expected a redis://host:port/db URL")
    return url
