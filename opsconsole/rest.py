"""API error format: every error is {"errors": [{"path": …, "message": …}]}, as the contract's 400s are.

At most the first 100 errors are listed (`ingest.contract.MAX_ERRORS`); when there
were more, `more_errors` says how many.
"""
from itertools import islice

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler

from ingest.contract import ContractError, error_body
from opsconsole.db import database_unavailable, database_unavailable_response


def error_paths(detail, path=""):
    """A DRF error detail as {"path", "message"} items, nested keys dotted and list items indexed as the contract's
    errors are (`links.runs[0]`, `evidence[1].href`; the API's error format; commands print them too)."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):  # a ListField's item
                yield from error_paths(value, f"{path}[{key}]")
            else:
                yield from error_paths(value, f"{path}.{key}" if path else str(key))
    elif isinstance(detail, list):
        for index, item in enumerate(detail):
            # A nested serializer with many=True: one dict per item, empty for the items that were fine.
            yield from error_paths(item, f"{path}[{index}]" if isinstance(item, dict) else path)
    else:
        yield {"path": path, "message": str(detail)}


def api_exception_handler(exc, context):
    if isinstance(exc, ContractError):  # the request body itself (BoundedJSONParser), in the contract's words
        return Response(exc.body(), status=exc.status)
    if database_unavailable(exc):  # a 503 with Retry-After, which senders retry; a 500 they would drop
        return database_unavailable_response(exc)
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = exc.detail if isinstance(exc, exceptions.APIException) else response.data
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        errors = [{"path": "Authorization", "message": str(detail)}]
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        errors = [{"path": "Content-Type", "message": str(detail)}]
    elif isinstance(detail, (dict, list)):
        errors = list(error_paths(detail))
    else:
        errors = [{"path": "", "message": str(detail)}]
    response.data = error_body(errors)
    return response


# The JSON type each field's value must have in a JSON body. DRF reads leniently for forms
# (0 as false, 5 as "5"); in JSON that would accept what the schema refuses.
_JSON_TYPES = (
    (serializers.BooleanField, (bool,), "a boolean (true or false)"),
    (serializers.CharField, (str,), "a string"),
    (serializers.IntegerField, (int,), "an integer"),
    (serializers.FloatField, (int, float), "a number"),
)


class JsonTypesMixin:
    """A serializer whose fields, in a JSON request body, take only values of their own JSON type."""

    def to_internal_value(self, data):
        request = self.context.get("request")
        content_type = getattr(request, "content_type", "") or ""
        if isinstance(data, dict) and content_type.split(";")[0].strip().lower() == "application/json":
            errors = _json_type_errors(self, data)
            if errors:
                raise exceptions.ValidationError(errors)
        return super().to_internal_value(data)


def _json_type_errors(field, value):
    """The values of the wrong JSON type under `field`, nested serializers and list items included (a run id
    given as 123 inside `links.runs` is refused as at the top, not stored as "123"); None when there are none."""
    if value is None or getattr(field, "read_only", False):
        return None
    if isinstance(field, (serializers.ListSerializer, serializers.ListField)):
        if not isinstance(value, list):
            return None  # the field's own validation names the wrong container
        found = {i: e for i, item in enumerate(value) if (e := _json_type_errors(field.child, item))}
        return found or None
    if isinstance(field, serializers.Serializer):
        if not isinstance(value, dict):
            return None
        found = {name: e for name, child in field.fields.items() if (e := _json_type_errors(child, value.get(name)))}
        return found or None
    for kind, types, words in _JSON_TYPES:
        if isinstance(field, kind) and type(value) not in types:
            return [f"must be {words}, got {type(value).__name__}"]
    return None


class OwnFormatParameter:
    """A view whose `format` query parameter is its own (json, csv, jsonl …), read and checked by the view.

    DRF reads `?format=` as the name of a renderer and answers a name it has no renderer for with a 404
    before the view runs; here the answer, and any error about the query, is JSON, and the view streams
    other formats itself.
    """

    def perform_content_negotiation(self, request, force=False):
        if "format" in request.query_params:
            renderer = self.get_renderers()[0]
            return (renderer, renderer.media_type)
        return super().perform_content_negotiation(request, force)


# Lines joined per hop to the database thread when served over ASGI: few hops, and a chunk of some 100 KB.
LINES_PER_HOP = 500


def streamed_download(request, lines, content_type: str, filename: str) -> StreamingHttpResponse:
    """A download written as `lines` (an iterator of bytes that reads the database) yields it: memory stays flat.

    Django serves a synchronous iterator over ASGI (uvicorn serves the console) by reading all of it into a
    list first; there the lines are pulled in batches on the request's own thread (thread_sensitive: the one
    its database connection and server-side cursor belong to) and handed over as an asynchronous iterator.
    """
    if isinstance(getattr(request, "_request", request), ASGIRequest):
        lines = _batches(iter(lines))
    response = StreamingHttpResponse(lines, content_type=content_type)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename)  # run ids may hold "/" and quotes
    response["Content-Disposition"] = f'attachment; filename="{safe}"'
    return response


async def _batches(lines):
    take = sync_to_async(lambda: b"".join(islice(lines, LINES_PER_HOP)), thread_sensitive=True)
    while chunk := await take():
        yield chunk
