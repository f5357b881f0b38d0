"""The console's own counters, shared by every process that serves it, and their Prometheus exposition at /metrics.

The work is spread over processes that cannot see each other's memory: web
processes (uvicorn workers) ingest and throttle, Celery workers on any host
evaluate and deliver. With REDIS_URL the counters live in one Redis hash, so
whichever web process is scraped answers for the whole deployment (the
standard client's multiprocess mode would only add up the processes of one
host). A Redis that is down costs a count, never an ingest: the breaker
(opsconsole/breaker.py) skips it for a while, and a scrape meanwhile reports
`warninglight_metrics_store_up 0`. Embedded (no Redis) everything runs in one
process and the counts are kept in its memory.

Counts only: nothing names a project unless METRICS_LABELS_WITH_PROJECTS is on
(then a `project` label, the project's slug), and nothing ever names a run.
The evaluation backlog is not counted here but read from the database at each
scrape (opsconsole/probes.py), so it is right whichever process answers.
"""
from __future__ import annotations

import json
import logging
import threading
from bisect import bisect_left

from django.conf import settings

from opsconsole.breaker import Breaker

log = logging.getLogger(__name__)

PREFIX = "warninglight_"
REDIS_KEY = "warninglight:metrics"
STORE = Breaker("metrics: Redis", logger=log)

# Counters: name (without _total) -> (help, label names besides `project`).
COUNTERS = {
    "ingest_batches": ("Batches accepted by ingest (a re-sent batch_id counts as duplicate)", ("result",)),
    "ingest_points": ("Points stored by ingest", ()),
    "ingest_events": ("Events stored by ingest", ()),
    "notification_deliveries": ("Notification delivery tries by outcome (ok, retrying, failed) and channel kind",
                                ("status", "kind")),
    "throttled_requests": ("Requests refused with 429 after too many failed logins (login) or bad tokens (token)",
                           ("scope",)),
}
# Histograms: name -> (help, bucket upper bounds in seconds).
HISTOGRAMS = {
    "evaluation_seconds": ("Time to evaluate one batch against the rules",
                           (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)),
}
# Label values every deployment has, shown at 0 before their first count: rate() and alerts see the series from the start.
KNOWN = {"ingest_batches": ({"result": "stored"}, {"result": "duplicate"}),
         "throttled_requests": ({"scope": "login"}, {"scope": "token"})}
PROJECT_LABELLED = {"ingest_batches", "ingest_points", "ingest_events", "notification_deliveries", "evaluation_seconds"}


def with_projects() -> bool:
    return settings.METRICS_LABELS_WITH_PROJECTS


def _field(name: str, labels: dict) -> str:
    return name + json.dumps(labels, sort_keys=True, separators=(",", ":"))


def _parse(field: str) -> tuple[str, dict]:
    cut = field.index("{")
    return field[:cut], json.loads(field[cut:])


class MemoryStore:
    """One process's counts: the embedded console, where ingest, evaluation and delivery share the process."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}

    def add(self, increments: dict[str, float]) -> None:
        with self._lock:
            for field, amount in increments.items():
                self._values[field] = self._values.get(field, 0) + amount

    def read(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


class RedisStore:
    """Counts in one Redis hash, shared by every web and worker process of the deployment."""

    def __init__(self, url: str):
        import redis

        # Short timeouts: a count is never worth holding an ingest for.
        self.client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        self.errors = (redis.RedisError, OSError)

    def add(self, increments: dict[str, float]) -> None:
        def send():
            pipe = self.client.pipeline(transaction=False)
            for field, amount in increments.items():
                if float(amount).is_integer():
                    pipe.hincrby(REDIS_KEY, field, int(amount))
                else:
                    pipe.hincrbyfloat(REDIS_KEY, field, amount)
            pipe.execute()

        STORE.call(send, errors=self.errors)

    def read(self) -> dict[str, float] | None:
        raw = STORE.call(lambda: self.client.hgetall(REDIS_KEY), errors=self.errors, force=True)
        if raw is None:
            return None
        return {key.decode(): float(value) for key, value in raw.items()}

    def clear(self) -> None:
        STORE.call(lambda: self.client.delete(REDIS_KEY), errors=self.errors, force=True)


_store = None
_store_url = object()
_store_lock = threading.Lock()


def store():
    """The store for the current settings (tests switch REDIS_URL; a process otherwise keeps one)."""
    global _store, _store_url
    url = settings.REDIS_URL
    with _store_lock:
        if _store is None or url != _store_url:
            _store, _store_url = (RedisStore(url) if url else MemoryStore()), url
        return _store


def _labels(name: str, labels: dict, project) -> dict:
    labels = {key: str(value) for key, value in labels.items()}
    if project is not None and name in PROJECT_LABELLED and with_projects():
        labels["project"] = getattr(project, "slug", None) or str(project)
    return labels


def _safely(increments: dict[str, float]) -> None:
    try:
        store().add(increments)
    except Exception:  # a metric is never worth failing the work it counts
        log.exception("metrics: could not record %s", sorted(increments))


def count(name: str, amount: float = 1, *, project=None, **labels) -> None:
    """Add to a counter of COUNTERS; `project` becomes a label only when METRICS_LABELS_WITH_PROJECTS is on."""
    assert name in COUNTERS, name
    if amount:
        _safely({_field(name, _labels(name, labels, project)): amount})


def count_many(counts: dict[str, float], *, project=None, labels=None) -> None:
    """Several counters at once (one round trip): {name: amount}, each with `labels`.get(name, {})."""
    labels = labels or {}
    _safely({_field(name, _labels(name, labels.get(name, {}), project)): amount
             for name, amount in counts.items() if amount})


def observe(name: str, seconds: float, *, project=None) -> None:
    """One observation of a histogram of HISTOGRAMS (the buckets are cumulative, as Prometheus reads them)."""
    _, bounds = HISTOGRAMS[name]
    labels = _labels(name, {}, project)
    increments = {_field(name + ":sum", labels): seconds, _field(name + ":count", labels): 1}
    for bound in bounds[bisect_left(bounds, seconds):]:
        increments[_field(name + ":bucket", {**labels, "le": repr(bound)})] = 1
    increments[_field(name + ":bucket", {**labels, "le": "+Inf"})] = 1
    _safely(increments)


def reset() -> None:
    """Forget every count (between tests)."""
    STORE.reset()
    store().clear()
    STORE.reset()


# --- exposition ----------------------------------------------------------------------------------------------

class StoredMetrics:
    """A prometheus_client collector of the shared counts: every counter and histogram, at zero when never counted."""

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        values = store().read()
        up = GaugeMetricFamily(PREFIX + "metrics_store_up",
                               "1 when the shared counts could be read (Redis, or this process when embedded)")
        up.add_metric([], 0 if values is None else 1)
        yield up
        if values is None:
            return
        series: dict[str, dict[tuple, float]] = {}
        naming = with_projects()
        for field, value in values.items():
            name, labels = _parse(field)
            if "project" in labels and not naming:
                # Counted while the setting was on (or by another process that has it on): the promise is
                # about what /metrics says now, so a project's name never leaves once it is turned off.
                continue
            series.setdefault(name, {})[tuple(sorted(labels.items()))] = value
        for name, (help_text, label_names) in COUNTERS.items():
            family = CounterMetricFamily(PREFIX + name, help_text, labels=None)
            seen = series.get(name, {})
            if not with_projects():
                seen = {**{tuple(sorted(labels.items())): 0 for labels in KNOWN.get(name, ())}, **seen}
            for labels, value in sorted(seen.items()):
                family.samples.append(_sample(PREFIX + name + "_total", dict(labels), value))
            if not seen and not label_names:
                family.samples.append(_sample(PREFIX + name + "_total", {}, 0))
            yield family
        for name, (help_text, bounds) in HISTOGRAMS.items():
            yield from _histograms(name, help_text, bounds, series, HistogramMetricFamily)


def _sample(name, labels, value):
    from prometheus_client.samples import Sample

    return Sample(name, labels, value)


def _histograms(name, help_text, bounds, series, family_class):
    counts = series.get(name + ":count", {}) or {(): 0}
    sums, buckets = series.get(name + ":sum", {}), series.get(name + ":bucket", {})
    family = family_class(PREFIX + name, help_text, labels=None)
    for labels in sorted(counts):
        base = dict(labels)
        for bound in [*(repr(b) for b in bounds), "+Inf"]:
            key = tuple(sorted({**base, "le": bound}.items()))
            family.samples.append(_sample(PREFIX + name + "_bucket", {**base, "le": bound}, buckets.get(key, 0)))
        family.samples.append(_sample(PREFIX + name + "_count", base, counts[labels]))
        family.samples.append(_sample(PREFIX + name + "_sum", base, sums.get(labels, 0)))
    yield family
