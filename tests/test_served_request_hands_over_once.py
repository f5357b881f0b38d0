"""Served by uvicorn, a request crosses from the event loop to a thread once for all its middleware and its view.

Each crossing costs time on every ingest batch (docs/benchmarks.md); Django's own
ASGI handler made seven for a synchronous view. What the middleware does must not
change: a gzip body is still inflated before the view, a bad point still named.
"""
import gzip

import httpx
import orjson
from asgiref import sync

from ingest.models import BatchReceipt


def batch(run_id, value=1.0):
    return {"run": {"id": run_id}, "points": [{"step": 1, "metric": "loss", "value": value}]}


def test_an_ingest_request_is_handed_to_a_thread_once_for_middleware_and_view(console_server, token, monkeypatch):
    with httpx.Client(base_url=console_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        assert http.post("/api/v1/ingest", json=batch("warm")).status_code == 202  # first request: imports, connects
        handed = []
        real = sync.SyncToAsync.__call__

        def counted(self, *args, **kwargs):
            handed.append(getattr(self.func, "__qualname__", repr(self.func)))
            return real(self, *args, **kwargs)

        monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
        response = http.post("/api/v1/ingest", json=batch("once"))
    assert response.status_code == 202, response.text
    # The request_started receivers, and the middleware chain with the view in it. Closing a response is one more,
    # after its answer went out (the previous request's may land in this window too): not counted.
    assert len([name for name in handed if name != "HttpResponseBase.close"]) <= 2, handed


def test_served_ingest_still_inflates_gzip_and_names_a_bad_field(console_server, token):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=console_server.url, headers=headers, timeout=30) as http:
        zipped = http.post("/api/v1/ingest", content=gzip.compress(orjson.dumps(batch("zipped"))),
                           headers={"Content-Encoding": "gzip"})
        bad = http.post("/api/v1/ingest", content=orjson.dumps(batch("bad", value=True)))
    assert zipped.status_code == 202, zipped.text
    assert zipped.json()["accepted"]["points"] == 1
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["path"] == "points[0].value"
    assert list(BatchReceipt.objects.values_list("run__run_id", flat=True)) == ["zipped"]
