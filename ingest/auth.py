from django.utils.functional import cached_property
from rest_framework import authentication, exceptions

from ingest.models import ProjectToken, hash_token


class ProjectTokenUser:
    """The identity behind a project token: it may read and write its one project."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, token):
        self.token = token

    @cached_property
    def project(self):
        return self.token.project

    def __str__(self):
        return f"token {self.token.hint}…"


def token_from_header(header: str | None):
    """The ProjectToken named by an `Authorization: Bearer …` header, or None if absent."""
    if not header:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise exceptions.AuthenticationFailed("Authorization must be 'Bearer <token>'")
    token = (
        ProjectToken.objects.select_related("project")
        .filter(token_hash=hash_token(raw.strip()), revoked_at__isnull=True)
        .first()
    )
    if token is None:
        raise exceptions.AuthenticationFailed("unknown or revoked token")
    return token


class ProjectTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        token = token_from_header(request.META.get("HTTP_AUTHORIZATION"))
        if token is None:
            return None
        return ProjectTokenUser(token), token

    def authenticate_header(self, request):
        return 'Bearer realm="warning-light"'


class PersonalTokenAuthentication(authentication.BaseAuthentication):
    """`Bearer wlu_…`: a user's personal API token (manage.py api_token); other bearer tokens pass through."""

    def authenticate(self, request):
        from opsconsole.models import PersonalToken

        header = request.META.get("HTTP_AUTHORIZATION") or ""
        scheme, _, raw = header.partition(" ")
        raw = raw.strip()
        if scheme.lower() != "bearer" or not raw.startswith(PersonalToken.PREFIX):
            return None
        token = (
            PersonalToken.objects.select_related("user")
            .filter(token_hash=hash_token(raw), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("unknown or revoked token")
        return token.user, token

    def authenticate_header(self, request):
        return 'Bearer realm="warning-light"'
