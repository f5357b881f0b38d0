"""What any request must be before a view sees it: bounded, decodable, free of NUL.

The middleware answers first, for every path: a NUL character in the URL path
or a query parameter (PostgreSQL cannot compare text holding one), a declared
body over the contract's 4 MiB, and, on API paths, a Content-Encoding other than
`identity` or `gzip` (415, path `Content-Encoding`). A gzip body is inflated
here, at most to the same 4 MiB, so every view and parser after it reads plain
bytes. API paths get the API's error body; console pages get Django's 400 (and
a plain 413).

`BoundedJSONParser` is DRF's JSON parser for every API request body: the
ingest contract's JSON reading (no NaN tokens here), then one walk that refuses
nesting deeper than `MAX_JSON_DEPTH`, NUL characters and numbers beyond the
float range, each by its path, the list capped as all error lists are.
"""
import io
import zlib

from asgiref.sync import iscoroutinefunction
from django.core.exceptions import BadRequest
from django.http import HttpResponse, JsonResponse
from django.utils.decorators import sync_and_async_middleware
from rest_framework.parsers import JSONParser

from ingest.contract import MAX_BODY_BYTES, ContractError, TooLarge, check_body_size, check_json_document, error_body, loads

API_PREFIX = "/api/"
GZIP = ("gzip", "x-gzip")
NUL = "\x00"


class Refused(Exception):
    def __init__(self, status, path, message):
        super().__init__(message)
        self.status, self.path, self.message = status, path, message


def _shown(name: str) -> str:
    name = name.replace(NUL, "\\u0000")
    return name if len(name) <= 64 else name[:64] + "…"


def _check_url(request):
    if NUL in request.path_info:
        raise Refused(400, "url", "the URL path must not contain the NUL character (%00)")
    query = request.META.get("QUERY_STRING", "")
    if "%00" in query or NUL in query:
        for key, values in request.GET.lists():
            if NUL in key:
                raise Refused(400, _shown(key), "query parameter names must not contain the NUL character (%00)")
            if any(NUL in value for value in values):
                raise Refused(400, _shown(key), f"query parameter {_shown(key)} must not contain the NUL character (%00)")


def _declared_length(request) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0  # the server framed the body; views check what they read


def gunzip(data: bytes, limit: int = MAX_BODY_BYTES) -> bytes:
    """A gzip body inflated, never past `limit` bytes (TooLarge), every member of it; ValueError if it is not gzip."""
    out = bytearray()
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(data, limit + 1 - len(out))
        except zlib.error as exc:
            raise ValueError(f"the body is not valid gzip ({exc})") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise TooLarge(f"body is over {limit} bytes once inflated; at most {limit} bytes (4 MiB) per request — split the batch")
        if not inflater.eof:
            raise ValueError("the gzip body ends early")
        data = inflater.unused_data.lstrip(b"\x00")  # members may follow, and padding
    return bytes(out)


def _decode_body(request):
    """Undo a gzip Content-Encoding in place; refuse any other encoding."""
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding in ("", "identity"):
        return
    if encoding not in GZIP:
        raise Refused(415, "Content-Encoding", f"unsupported Content-Encoding {_shown(encoding)!r}; send the body as it is, or gzip")
    try:
        body = gunzip(request.body)
    except ValueError as exc:
        raise Refused(400, "Content-Encoding", str(exc)) from None
    # Every reader after this one (request.body, DRF's stream, request.POST) sees the inflated bytes.
    request._body = body
    request._stream = io.BytesIO(body)
    request.META["CONTENT_LENGTH"] = str(len(body))
    del request.META["HTTP_CONTENT_ENCODING"]


def _refusal(request):
    api = request.path_info.startswith(API_PREFIX)
    try:
        _check_url(request)
        check_body_size(_declared_length(request))
        if api:
            _decode_body(request)
    except ContractError as exc:
        refused = Refused(exc.status, exc.errors[0]["path"], exc.errors[0]["message"])
    except Refused as exc:
        refused = exc
    else:
        return None
    if api:
        return JsonResponse(error_body([{"path": refused.path, "message": refused.message}]), status=refused.status)
    if refused.status == 413:
        return HttpResponse(refused.message, status=413, content_type="text/plain; charset=utf-8")
    raise BadRequest(refused.message)  # the console's own 400 page


@sync_and_async_middleware
def request_guard(get_response):
    if iscoroutinefunction(get_response):
        async def middleware(request):
            return _refusal(request) or await get_response(request)
    else:
        def middleware(request):
            return _refusal(request) or get_response(request)
    return middleware


class BoundedJSONParser(JSONParser):
    """JSON request bodies of the API: strict JSON, within MAX_JSON_DEPTH, storable; ContractError (400) otherwise."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not raw.strip():
            raise ContractError([{"path": "", "message": "empty body: send a JSON object"}])
        return check_json_document(loads(raw, nonfinite_tokens=False))
