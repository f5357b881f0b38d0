"""One line per HTTP request on the logger `opsconsole.access`, written when the response has been sent.

    GET /api/v1/runs/?page=2 200 12.4ms 3512B client=10.0.0.7

Method, path, status, time until the last byte went out (a streamed export
counts whole), bytes of body sent, and the client's address. Query parameters
whose names say they hold a credential (token, key, secret, password,
signature, auth…) are written as `REDACTED`; a request that never got an
answer (the client left) is written with status 0.

An ASGI middleware around the HTTP application (opsconsole/asgi.py), so it
sees what the client saw. ACCESS_LOG=0 turns it off; the probes' and
Prometheus' own requests (/healthz, /readyz, /metrics), asked every few
seconds, are left out unless ACCESS_LOG_PROBES=1. The servers' own access
logs stay off (opsconsole/serve.py; `--no-access-log` in the Dockerfile),
so no request is written twice, nor with its query string whole.
"""
from __future__ import annotations

import logging
import re
import time
from urllib.parse import parse_qsl, quote

from django.conf import settings

log = logging.getLogger("opsconsole.access")

SECRET_NAME = re.compile(r"token|key|secret|passw|signature|sig$|auth(?!or)|session|credential|code$", re.I)
PROBE_PATHS = ("/healthz", "/readyz", "/metrics")


def shown_query(raw: bytes) -> str:
    if not raw:
        return ""
    try:
        pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    except ValueError:
        return "?(unreadable)"
    return "?" + "&".join(f"{quote(k, safe='')}={'REDACTED' if SECRET_NAME.search(k) else quote(v, safe='')}"
                          for k, v in pairs)


def line(scope, status: int, elapsed: float, sent: int) -> str:
    client = scope.get("client")
    path = quote(scope.get("path", ""), safe="/:@!$&'()*+,;=-._~")
    return (f"{scope.get('method', '?')} {path}{shown_query(scope.get('query_string', b''))} {status} "
            f"{elapsed * 1000:.1f}ms {sent}B client={client[0] if client else '-'}")


class AccessLog:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not settings.ACCESS_LOG or (
                scope.get("path") in PROBE_PATHS and not settings.ACCESS_LOG_PROBES):
            return await self.app(scope, receive, send)
        started = time.monotonic()
        seen = {"status": 0, "bytes": 0}

        async def counting_send(message):
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            elif message["type"] == "http.response.body":
                seen["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            log.info("%s", line(scope, seen["status"], time.monotonic() - started, seen["bytes"]))
