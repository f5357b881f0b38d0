"""Ingest's DRF views: the contract's write endpoints (a batch, an Alertmanager notification)."""
from django.db import connection
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.auth import ProjectTokenAuthentication, ProjectTokenUser
from ingest.contract import ContractError, check_body_size, error_body, parse_json_batch, parse_ndjson
from ingest.alertmanager import parse_webhook, store_alerts
from ingest import openapi
from ingest.serializers import IngestResponseSerializer
from ingest.pacing import evaluation_pace
from ingest.service import RunOfAnotherProject, ingest_batch
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
        response = Response(result.as_response(), status=200 if result.duplicate else 202)
        pace = evaluation_pace(request.user.project.pk)
        if pace:
            # Held on the event loop (opsconsole/handler.py), after the batch is committed; the database
            # connection goes back now instead of waiting with the answer (unless a transaction around the
            # request still needs it, as a test's does).
            response.hold_seconds = pace
            if not connection.in_atomic_block:
                connection.close()
        return response


class AlertmanagerView(APIView):
    authentication_classes = [ProjectTokenAuthentication]
    parser_classes = []

    permission_classes = [HasProjectToken]

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT, 413: OpenApiTypes.OBJECT},
    )
    def post(self, request):
        """Prometheus Alertmanager webhook receiver (payload version 4): 202 with what was stored and what was put aside."""
        project = request.user.project
        try:
            notification = parse_webhook(request_body(request), project.catch_all_run_id)
            opened, ended = store_alerts(project, notification.alerts)
        except ContractError as exc:
            return Response(exc.body(), status=exc.status)
        except RunOfAnotherProject:
            # Only a catch-all taken before it was reserved can get here.
            return Response({"errors": [{"path": "alerts[].labels.run", "message":
                                         f"the catch-all run {project.catch_all_run_id!r} belongs to another project"}]}, status=403)
        return Response({"accepted": {"alerts": len(notification.alerts) + len(notification.rejected), "events": opened,
                                      "ended": ended}, "put_aside": notification.put_aside()}, status=202)
