"""What load balancers, Kubernetes and Prometheus ask the console: /healthz, /readyz and /metrics.

- /healthz: the process answers (no database, no broker): a liveness probe.
- /readyz: the database answers `SELECT 1` and, with REDIS_URL, the broker
  answers a ping, each within READY_TIMEOUT_SECONDS; 503 otherwise, the body
  naming which one failed (never a URL or a password).
- /metrics: Prometheus' text format: the shared counts (opsconsole/metrics.py)
  and the evaluation backlog, read from the database at each scrape so that
  every process answers the same. Open unless METRICS_TOKEN is set, then only
  with `Authorization: Bearer <METRICS_TOKEN>`.

Answered by the first middleware, before the host check and sessions: a
kubelet or a Prometheus discovering pods asks by the pod's address, which no
ALLOWED_HOSTS names, and none of these answers builds a URL from the Host.
"""
from __future__ import annotations

import hmac
import logging
import threading

from django.conf import settings
from django.db import connections
from django.db.models import Count, Min
from django.http import HttpResponse, JsonResponse
from django.utils import timezone

from ingest.models import BatchReceipt
from opsconsole import metrics

log = logging.getLogger(__name__)

PATHS = ("/healthz", "/readyz", "/metrics")
# The text format every Prometheus reads (newer clients default to 1.0.0, which older servers may not know).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


# --- readiness -----------------------------------------------------------------------------------------------

def _within(seconds: float, check) -> str:
    """check() run in a thread of its own: "ok", or why not, in words that hold no secret."""
    outcome = ["timed out"]

    def run():
        try:
            check()
            outcome[0] = "ok"
        except Exception as exc:  # the class only: a driver's message may quote the URL and its password
            outcome[0] = f"unreachable ({type(exc).__name__})"
        finally:
            connections.close_all()  # this thread's own connections, back to the pool

    thread = threading.Thread(target=run, name="readiness-check", daemon=True)
    thread.start()
    thread.join(seconds)
    return outcome[0]


def _database():
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _broker():
    import redis

    timeout = settings.READY_TIMEOUT_SECONDS
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    finally:
        client.close()


def readiness() -> dict[str, str]:
    timeout = settings.READY_TIMEOUT_SECONDS
    checks = {"database": _within(timeout, _database)}
    checks["broker"] = _within(timeout, _broker) if settings.REDIS_URL else "ok (embedded: no broker)"
    return checks


def ready_response() -> JsonResponse:
    checks = readiness()
    failed = sorted(name for name, state in checks.items() if not state.startswith("ok"))
    if failed:
        log.warning("not ready: %s", ", ".join(f"{name} {checks[name]}" for name in failed))
    return JsonResponse({"ready": not failed, "failed": failed, "checks": checks}, status=503 if failed else 200)


# --- metrics -------------------------------------------------------------------------------------------------

class EvaluationBacklog:
    """Batches stored but not yet evaluated, and how long the oldest has waited: one query on the partial index
    `receipt_unevaluated` (only unevaluated rows are in it)."""

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily(metrics.PREFIX + "database_up", "1 when the database answered this scrape's query")
        by_project = metrics.with_projects()
        try:
            rows = self._rows(by_project)
        except Exception as exc:
            log.warning("metrics: the evaluation backlog could not be read (%s)", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        labels = ["project"] if by_project else []
        waiting = GaugeMetricFamily(metrics.PREFIX + "evaluation_backlog_batches",
                                    "Batches stored but not yet evaluated", labels=labels)
        oldest = GaugeMetricFamily(metrics.PREFIX + "evaluation_oldest_unevaluated_seconds",
                                   "Seconds the oldest unevaluated batch has waited (0 when none waits)", labels=labels)
        now = timezone.now()
        for project, n, first in rows:
            key = [project] if by_project else []
            waiting.add_metric(key, n)
            oldest.add_metric(key, max(0.0, (now - first).total_seconds()) if first else 0.0)
        yield waiting
        yield oldest

    @staticmethod
    def _rows(by_project: bool):
        unevaluated = BatchReceipt.objects.filter(evaluated_at__isnull=True)
        if by_project:
            grouped = unevaluated.values("run__project__slug").annotate(n=Count("id"), first=Min("received_at"))
            return [(row["run__project__slug"], row["n"], row["first"]) for row in grouped.order_by("run__project__slug")]
        total = unevaluated.aggregate(n=Count("id"), first=Min("received_at"))
        return [(None, total["n"], total["first"])]


def _registry():
    from prometheus_client import CollectorRegistry

    # A registry of our own: the client's default one holds this process's CPU and memory, which would differ
    # with every scrape as a load balancer picks another process.
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics.StoredMetrics())
    registry.register(EvaluationBacklog())
    return registry


def _authorized(request) -> bool:
    expected = settings.METRICS_TOKEN
    if not expected:
        return True
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())


def metrics_response(request) -> HttpResponse:
    if not _authorized(request):
        return HttpResponse("METRICS_TOKEN is set: send it as Authorization: Bearer <token>\n", status=401,
                            content_type="text/plain; charset=utf-8", headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    from prometheus_client import generate_latest

    response = HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE)
    response["Cache-Control"] = "no-store"
    return response


def answer(request) -> HttpResponse | None:
    path = request.path_info
    if path not in PATHS:
        return None
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    if path == "/healthz":
        return HttpResponse("ok\n", content_type="text/plain; charset=utf-8")
    if path == "/readyz":
        return ready_response()
    return metrics_response(request)


class ProbesMiddleware:
    """First in MIDDLEWARE: the three paths are answered here, before anything checks the Host or reads a session."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return answer(request) or self.get_response(request)
