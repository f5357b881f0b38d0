"""API error format: every error is {"errors": [{"path": …, "message": …}]}, as the contract's 400s are."""
from rest_framework import exceptions
from rest_framework.views import exception_handler


def _flatten(detail, path=""):
    if isinstance(detail, dict):
        for key, value in detail.items():
            yield from _flatten(value, f"{path}.{key}" if path else str(key))
    elif isinstance(detail, list):
        for item in detail:
            yield from _flatten(item, path)
    else:
        yield {"path": path, "message": str(detail)}


def api_exception_handler(exc, context):
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = exc.detail if isinstance(exc, exceptions.APIException) else response.data
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        errors = [{"path": "Authorization", "message": str(detail)}]
    elif isinstance(detail, (dict, list)):
        errors = list(_flatten(detail))
    else:
        errors = [{"path": "", "message": str(detail)}]
    response.data = {"errors": errors}
    return response
