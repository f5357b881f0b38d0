import math

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.auth import ProjectTokenAuthentication, ProjectTokenUser
from ingest.contract import ContractError, check_body_size, error_body, parse_json_batch, parse_ndjson
from ingest.models import Event, Series
from ingest import openapi
from ingest.serializers import (
    RUN_ID_PARAMETER,
    EventsQuerySerializer,
    EventsResponseSerializer,
    IngestResponseSerializer,
    PointsQuerySerializer,
    PointsResponseSerializer,
    RunDetailSerializer,
    RunSummarySerializer,
    read_query,
)
from ingest.service import RunOfAnotherProject, ingest_batch
from ingest.storage import from_db_float, read_points
from opsconsole.permissions import visible_runs
from opsconsole.schema import errors

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
    return Response(error_body(errors), status=status)


class IngestView(APIView):
    """POST a batch (JSON) or NDJSON lines, as contract v1 describes."""

    authentication_classes = [ProjectTokenAuthentication]
    permission_classes = [HasProjectToken]
    parser_classes = []

    @extend_schema(
        operation_id="ingest",
        request={"application/json": openapi.BATCH, "application/x-ndjson": openapi.NDJSON},
        parameters=[OpenApiParameter("X-Batch-Id", str, OpenApiParameter.HEADER, description="NDJSON only: the batch id "
                                     "(at most 128 characters); a re-sent batch id is a duplicate, not a restart")],
        responses={
            202: OpenApiResponse(IngestResponseSerializer, description="stored"),
            200: OpenApiResponse(IngestResponseSerializer, description="a duplicate batch_id: nothing stored again"),
            **errors(403, s403="the run id belongs to another project (path `run.id`)"),
        },
        description="Contract v1 ingest: a JSON batch or NDJSON lines, plain or gzip (Content-Encoding).",
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
            result = ingest_batch(request.user.project, batch)
        except ContractError as exc:
            return Response(exc.body(), status=exc.status)
        except RunOfAnotherProject:
            return _errors(403, [{"path": "run.id", "message": "this run id belongs to another project; this token may not write to it"}])
        return Response(result.as_response(), status=200 if result.duplicate else 202)


class RunListView(APIView):
    @extend_schema(operation_id="runs_list", responses=RunSummarySerializer(many=True))
    def get(self, request):
        runs = visible_runs(request.user).order_by("-last_seen_at", "run_id")
        return Response(RunSummarySerializer(runs, many=True).data)


class RunDetailView(APIView):
    @extend_schema(operation_id="runs_retrieve", parameters=[RUN_ID_PARAMETER], responses={200: RunDetailSerializer, **errors(404)})
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


class PointsView(APIView):
    @extend_schema(operation_id="runs_points", parameters=[RUN_ID_PARAMETER, PointsQuerySerializer],
                   responses={200: PointsResponseSerializer, **errors(404)})
    def get(self, request, run_id):
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        query = read_query(request, PointsQuerySerializer)
        metric, component, start, end = (query.get(key) for key in ("metric", "component", "start", "end"))
        all_attempts = query.get("attempt") == "all"
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
    @extend_schema(operation_id="runs_events", parameters=[RUN_ID_PARAMETER, EventsQuerySerializer],
                   responses={200: EventsResponseSerializer, **errors(404)})
    def get(self, request, run_id):
        """Health events of a run in step order: reported by the job, or Alertmanager alerts (with when they ended)."""
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        query = read_query(request, EventsQuerySerializer)
        events = Event.objects.filter(run=run).order_by("step", "id")
        if query.get("start") is not None:
            events = events.filter(step__gte=query["start"])
        if query.get("end") is not None:
            events = events.filter(step__lte=query["end"])
        if query.get("condition"):
            events = events.filter(condition=query["condition"])
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
