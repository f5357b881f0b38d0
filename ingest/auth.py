from django.utils.functional import cached_property
from rest_framework import authentication, exceptions, status

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


class TooManyBadTokens(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "throttled"

    def __init__(self, wait: int):
        # DRF's handler turns `wait` into the Retry-After header.
        self.wait = wait
        super().__init__({"Authorization": f"too many failed authentications from this address or with this token; "
                                           f"retry after {wait} s"})


def throttled(authenticate):
    """Bearer authentication counting bad tokens (opsconsole/throttle.py): past the limit it answers 429."""
    from opsconsole.throttle import TOKENS

    def checked(self, request):
        header = request.META.get("HTTP_AUTHORIZATION") or ""
        if not header:
            return authenticate(self, request)
        if not getattr(request, "_bearer_throttle_checked", False):  # once per request, not once per class
            request._bearer_throttle_checked = True
            wait = TOKENS.wait_for(request, header)
            if wait:
                raise TooManyBadTokens(wait)
        try:
            return authenticate(self, request)
        except exceptions.AuthenticationFailed:
            TOKENS.failure(request, header)
            raise

    return checked


class ProjectTokenAuthentication(authentication.BaseAuthentication):
    @throttled
    def authenticate(self, request):
        token = token_from_header(request.META.get("HTTP_AUTHORIZATION"))
        if token is None:
            return None
        return ProjectTokenUser(token), token

    def authenticate_header(self, request):
        return 'Bearer realm="warning-light"'


class PersonalTokenAuthentication(authentication.BaseAuthentication):
    """`Bearer wlu_…`: a user's personal API token (manage.py api_token); other bearer tokens pass through."""

    @throttled
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
