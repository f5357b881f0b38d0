"""Errors answer in the caller's language: JSON errors under /api/, the console's own pages elsewhere (never Django's)."""
import pytest
from django.test import Client

from runs import api as run_api
from runs import pages as run_pages

pytestmark = pytest.mark.django_db


def api_errors(response):
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert list(body) == ["errors"] and body["errors"]
    assert all(set(error) == {"path", "message"} for error in body["errors"])
    return body["errors"]


def console_page(response):
    html = response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    assert '<header class="top">' in html and "Warning Light" in html  # the console's layout
    assert "URLconf" not in html and "Traceback" not in html and "Django" not in html
    return html


def test_an_unknown_api_path_is_a_json_404(token):
    response = Client().get("/api/v1/no-such-thing/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 404
    [error] = api_errors(response)
    assert "/api/v1/no-such-thing/" in error["message"]


def test_ingest_with_a_trailing_slash_is_a_json_404_that_names_the_endpoint(token):
    response = Client().post("/api/v1/ingest/", b'{"run": {"id": "r"}, "points": []}', content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 404
    [error] = api_errors(response)
    assert "use POST /api/v1/ingest (without the trailing slash)" in error["message"]


def test_an_api_path_missing_its_slash_is_never_redirected_and_names_the_endpoint(token):
    # A redirect would turn a POST into a GET and lose the body (and under DEBUG Django raises a 500).
    client = Client(raise_request_exception=False)
    for method in ("get", "post"):
        response = getattr(client, method)("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 404, (method, response.status_code)
        [error] = api_errors(response)
        assert "/api/v1/runs/" in error["message"]


def test_a_method_the_endpoint_does_not_take_is_a_json_405(token):
    response = Client().get("/api/v1/ingest", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405
    api_errors(response)


def test_a_server_error_under_the_api_is_json_and_tells_nothing_of_the_internals(owner, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(run_api.RunListView, "get", boom)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    response = client.get("/api/v1/runs/")
    assert response.status_code == 500
    [error] = api_errors(response)
    assert "secret internals" not in error["message"]


def test_a_bad_host_under_the_api_is_a_json_400():
    response = Client().get("/api/v1/runs/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    api_errors(response)


def test_the_console_has_its_own_404_page(owner):
    client = Client()
    client.force_login(owner)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = console_page(response)
    assert "Page not found" in html and 'href="/"' in html
    assert "olivia" in html  # the layout knows who is logged in


def test_the_console_has_its_own_500_page(owner, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(run_pages, "runs_list", boom)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    response = client.get("/")
    assert response.status_code == 500
    html = console_page(response)
    assert "secret internals" not in html and "went wrong" in html


def test_the_console_has_its_own_403_page_for_a_missing_csrf_token(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post("/inbox/alerts/1/acknowledge/")
    assert response.status_code == 403
    html = console_page(response)
    assert "reload the page" in html


def test_the_console_has_its_own_400_page():
    response = Client().get("/accounts/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    console_page(response)
