"""Bearer tokens: a project's token (`wl_…`, for its jobs) and a user's personal token (`wlu_…`, for scripts).

A request's token is looked up once, before any throttle count is read
(`bearer`): a valid token is served whatever else was sent from its address,
since the per-address guess limit (opsconsole/throttle.py) refuses only tokens
the console does not know. A valid token of the kind an endpoint does not take
(a personal token on ingest) is a 401 that names both kinds; it is a mistake,
not a guess, so it never counts towards a throttle.
"""
from dataclasses import dataclass

from django.db import connection, models
from django.utils.functional import cached_property
from rest_framework import authentication, exceptions, status

from ingest.models import Project, ProjectToken, hash_token
from ingest.rows import Selection


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


class TokenKind(models.TextChoices):
    PROJECT = "project", "a project token"
    PERSONAL = "personal", "a personal token"


@dataclass(frozen=True)
class Bearer:
    """A valid token named by the request: its kind and its row (ProjectToken or PersonalToken)."""

    kind: TokenKind
    record: models.Model


class TooManyBadTokens(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "throttled"

    def __init__(self, wait: int):
        # DRF's handler turns `wait` into the Retry-After header.
        self.wait = wait
        super().__init__({"Authorization": f"too many unknown or revoked tokens from this address or with this token; "
                                           f"retry after {wait} s"})


class WrongKindOfToken(exceptions.AuthenticationFailed):
    pass


def raw_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` header; None when there is no header."""
    if not header:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise exceptions.AuthenticationFailed("Authorization must be 'Bearer <token>'")
    return raw.strip()


def find_token(raw: str) -> Bearer | None:
    """The valid token `raw` is, of either kind (its prefix says which table holds it): one indexed look-up."""
    from opsconsole.models import PersonalToken

    if raw.startswith(PersonalToken.PREFIX):
        personal = (PersonalToken.objects.select_related("user")
                    .filter(token_hash=hash_token(raw), revoked_at__isnull=True, user__is_active=True).first())
        return Bearer(TokenKind.PERSONAL, personal) if personal else None
    token = _project_token(hash_token(raw))
    return Bearer(TokenKind.PROJECT, token) if token else None


_TOKENS, _PROJECTS = Selection(ProjectToken), Selection(Project)


def _project_token(token_hash: str) -> ProjectToken | None:
    """ProjectToken.objects.select_related("project").filter(token_hash=…, revoked_at__isnull=True).first(),
    without building the query: every ingest request asks it (ingest/rows.py). Read afresh each time, so a
    revoked token stops at once."""
    tokens, projects = _TOKENS.table(), _PROJECTS.table()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_TOKENS.columns()}, {_PROJECTS.columns()} FROM {tokens} "
                       f"INNER JOIN {projects} ON {projects}.id = {tokens}.project_id "
                       f"WHERE {tokens}.token_hash = %s AND {tokens}.revoked_at IS NULL ORDER BY {tokens}.id ASC LIMIT 1",
                       [token_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(_TOKENS.fields)
    token, = _TOKENS.instances([row[:split]])
    token.project, = _PROJECTS.instances([row[split:]])
    return token


def token_from_header(header: str | None):
    """The ProjectToken named by an `Authorization: Bearer …` header, or None if absent (no throttle: for commands)."""
    raw = raw_token(header)
    if raw is None:
        return None
    found = find_token(raw)
    if found is None or found.kind != TokenKind.PROJECT:
        raise exceptions.AuthenticationFailed("unknown or revoked token")
    return found.record


def bearer(request) -> Bearer | None:
    """The request's valid bearer token (None without one), looked up once however many classes ask.

    An unknown or revoked token is counted (opsconsole/throttle.py) and answered 401, or 429 once it or its
    address is past its limit; the throttle is read only for such tokens, so it never refuses a valid one.
    """
    from opsconsole.throttle import TOKENS

    django_request = getattr(request, "_request", request)
    if hasattr(django_request, "_wl_bearer"):
        return django_request._wl_bearer
    raw = raw_token(request.META.get("HTTP_AUTHORIZATION"))
    found = None if raw is None else find_token(raw)
    if raw is not None and found is None:
        wait = TOKENS.wait_for(request, raw)
        if wait:
            raise TooManyBadTokens(wait)
        TOKENS.failure(request, raw)
        raise exceptions.AuthenticationFailed("unknown or revoked token")
    django_request._wl_bearer = found
    return found


def _of_another_kind(request, found: Bearer):
    """None when another of the view's classes takes this kind of token; otherwise a 401 naming what the view takes."""
    takes = []
    for authenticator in getattr(request, "authenticators", ()):
        if isinstance(authenticator, BearerTokenAuthentication):
            if authenticator.kind == found.kind:
                return None
            takes.append(authenticator.kind.label)
        elif isinstance(authenticator, authentication.SessionAuthentication):
            takes.append("the console's session")
    raise WrongKindOfToken(f"this endpoint takes {' or '.join(takes) or 'no token'}; this is {found.kind.label}")


class BearerTokenAuthentication(authentication.BaseAuthentication):
    kind: TokenKind

    def authenticate(self, request):
        found = bearer(request)
        if found is None:
            return None
        if found.kind != self.kind:
            return _of_another_kind(request, found)
        return self.identity(found.record), found.record

    def identity(self, record):
        """The request's user for a valid token of this class's kind."""
        raise NotImplementedError

    def authenticate_header(self, request):
        return 'Bearer realm="warning-light"'


class ProjectTokenAuthentication(BearerTokenAuthentication):
    kind = TokenKind.PROJECT

    def identity(self, record) -> ProjectTokenUser:
        return ProjectTokenUser(record)


class PersonalTokenAuthentication(BearerTokenAuthentication):
    """`Bearer wlu_…`: a user's personal API token (manage.py api_token); it acts with that user's roles."""

    kind = TokenKind.PERSONAL

    def identity(self, record):
        return record.user
