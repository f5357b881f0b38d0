"""The project's own pages: error responses (JSON under /api/, pages elsewhere) and the throttled login."""
import sys
from functools import wraps

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.views import defaults

from opsconsole.db import RETRY_AFTER_SECONDS, database_unavailable, database_unavailable_response
from opsconsole.throttle import LOGINS


# --- error responses -------------------------------------------------------------
# Under /api/ every error is JSON in the contract's form, whoever raised it (Django's
# URL resolver, a host check, an unexpected exception); elsewhere the console's own pages.

def _is_api(request):
    return request.path_info.startswith("/api/")


def _api_error(status, message):
    return JsonResponse({"errors": [{"path": "", "message": message}]}, status=status)


def _endpoint_hint(request):
    """The API path a caller most likely meant: the same path with or without its trailing slash."""
    path = request.path_info
    other = path[:-1] if path.endswith("/") else path + "/"
    try:
        resolve(other)
    except Resolver404:
        return ""
    prefix = request.path[: len(request.path) - len(path)]
    return f"; use {request.method} {prefix}{other} ({'without' if path.endswith('/') else 'with'} the trailing slash)"


def not_found(request, exception):
    if _is_api(request):
        return _api_error(404, f"no such endpoint: {request.method} {request.path}{_endpoint_hint(request)}")
    return defaults.page_not_found(request, exception)


def permission_denied(request, exception):
    if _is_api(request):
        return _api_error(403, str(exception) or "you may not do this")
    return defaults.permission_denied(request, exception)


def bad_request(request, exception):
    if _is_api(request):
        return _api_error(400, "bad request (for example a Host header this console does not serve)")
    return defaults.bad_request(request, exception)


def server_error(request):
    exc = sys.exc_info()[1]  # Django calls this while handling the exception
    if exc is not None and database_unavailable(exc):
        # Raised outside a DRF view (a middleware's session or user look-up, a page): still a 503 to retry.
        if _is_api(request):
            return database_unavailable_response(exc)
        # Rendered without the request: its user and session are in the database that is down.
        page = render_to_string("503.html", {"user": AnonymousUser(), "retry_seconds": RETRY_AFTER_SECONDS})
        return HttpResponse(page, status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    if _is_api(request):
        return _api_error(500, "internal error: the server's log has the details")
    return defaults.server_error(request)


def throttled_login(view):
    """A login view (the console's, the admin's) that counts failed attempts and refuses with 429 past the limit."""

    @wraps(view)
    def login(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = request.POST.get("username", "")
        wait = LOGINS.wait_for(request, username)
        if wait:
            response = render(request, "registration/login.html",
                              {"form": AuthenticationForm(request), "retry_minutes": -(-wait // 60)}, status=429)
            response["Retry-After"] = str(wait)
            return response
        response = view(request, *args, **kwargs)
        if response.status_code == 302 and request.user.is_authenticated:  # logged in: it redirects
            LOGINS.success(request, username)
        elif username:
            LOGINS.failure(request, username)
        return response

    return login
