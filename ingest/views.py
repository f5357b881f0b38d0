import math

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, permissions
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.auth import ProjectTokenAuthentication, ProjectTokenUser
from ingest.contract import ContractError, check_body_size, parse_json_batch, parse_ndjson
from ingest.models import Event, Series
from ingest.serializers import RunDetailSerializer, RunSummarySerializer
from ingest.service import RunOfAnotherProject, ingest_batch
from ingest.storage import from_db_float, read_points
from opsconsole.permissions import visible_runs

JSON_TYPES = {"application/json"}
NDJSON_TYPES = {"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"}


class HasProjectToken(permissions.BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.user, ProjectTokenUser)


def request_body(request) -> bytes:
    """The raw body, refused with 413 before reading when the declared length is over the limit."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0  # the server framed the body; its real size is checked after reading
    check_body_size(declared)
    return request._request.body


def _errors(status, errors):
    return Response({"errors": errors}, status=status)


class IngestView(APIView):
    """POST a batch (JSON) or NDJSON lines, as contract v1 describes."""

    authentication_classes = [ProjectTokenAuthentication]
    permission_classes = [HasProjectToken]
    parser_classes = []

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT, "application/x-ndjson": OpenApiTypes.STR},
        responses={202: OpenApiTypes.OBJECT, 200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 413: OpenApiTypes.OBJECT},
        description="Contract v1 ingest: a JSON batch or NDJSON lines. 202 stored, 200 duplicate batch_id.",
    )
    def post(self, request):
        content_type = request.content_type.split(";")[0].strip().lower()
        if content_type not in JSON_TYPES | NDJSON_TYPES:
            return _errors(415, [{"path": "Content-Type", "message": f"unsupported content type {content_type or '(none)'!r}; "
                                  "send application/json or application/x-ndjson"}])
        try:
            body = request_body(request)
            if content_type in JSON_TYPES:
                batch = parse_json_batch(body)
            else:
                batch = parse_ndjson(body, batch_id=request.headers.get("X-Batch-Id") or None)
                if batch.batch_id is not None and len(batch.batch_id) > 128:
                    raise ContractError([{"path": "X-Batch-Id", "message": "batch id is longer than 128 characters"}])
            result = ingest_batch(request.user.project, batch)
        except ContractError as exc:
            return _errors(exc.status, exc.errors)
        except RunOfAnotherProject:
            return _errors(403, [{"path": "run.id", "message": "this run id belongs to another project; this token may not write to it"}])
        return Response(result.as_response(), status=200 if result.duplicate else 202)


class RunListView(APIView):
    @extend_schema(responses=RunSummarySerializer(many=True))
    def get(self, request):
        runs = visible_runs(request.user).order_by("-last_seen_at", "run_id")
        return Response(RunSummarySerializer(runs, many=True).data)


class RunDetailView(APIView):
    @extend_schema(responses=RunDetailSerializer)
    def get(self, request, run_id):
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        return Response(RunDetailSerializer(run).data)


def wire_value(value: float):
    """A stored value as the contract writes it: non-finite values as strings."""
    if math.isfinite(value):
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _step_param(request, name):
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise exceptions.ValidationError({name: f"must be an integer step, got {raw!r}"}) from None
    if value < 0:
        raise exceptions.ValidationError({name: "must be ≥ 0"})
    return value


def series_params(request):
    """(metric, component, start, end) of a one-series read; metric is required."""
    metric = request.query_params.get("metric")
    if not metric:
        raise exceptions.ValidationError({"metric": "metric is required"})
    component = request.query_params.get("component") or ""
    return metric, component, _step_param(request, "start"), _step_param(request, "end")


class PointsView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("metric", str, required=True),
            OpenApiParameter("component", str),
            OpenApiParameter("start", int),
            OpenApiParameter("end", int),
            OpenApiParameter("attempt", str, enum=["all"]),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, run_id):
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        metric, component, start, end = series_params(request)
        all_attempts = request.query_params.get("attempt") == "all"
        series = Series.objects.filter(run=run, metric=metric, component=component).first()
        points = []
        if series is not None:
            steps, values, attempts = read_points(series, start=start, end=end, all_attempts=all_attempts)
            if all_attempts:
                points = [{"step": int(s), "value": wire_value(float(v)), "attempt": int(a)} for s, v, a in zip(steps, values, attempts)]
            else:
                points = [{"step": int(s), "value": wire_value(float(v))} for s, v in zip(steps, values)]
        return Response({"run": run.run_id, "metric": metric, "component": component or None, "points": points})


class EventsView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("start", int), OpenApiParameter("end", int), OpenApiParameter("condition", str)],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, run_id):
        """Health events of a run in step order: reported by the job, or Alertmanager alerts (with when they ended)."""
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        events = Event.objects.filter(run=run).order_by("step", "id")
        start, end = _step_param(request, "start"), _step_param(request, "end")
        if start is not None:
            events = events.filter(step__gte=start)
        if end is not None:
            events = events.filter(step__lte=end)
        if request.query_params.get("condition"):
            events = events.filter(condition=request.query_params["condition"])
        return Response(
            {
                "run": run.run_id,
                "events": [
                    {
                        "step": e.step,
                        "component": e.component,
                        "condition": e.condition,
                        "magnitude": wire_value(from_db_float(e.magnitude)),
                        "time": e.time,
                        "detail": e.detail,
                        "attempt": e.attempt,
                        "source": e.source,
                        "fingerprint": e.fingerprint or None,
                        "ended_at": e.ended_at,
                    }
                    for e in events[:10000]
                ],
            }
        )
