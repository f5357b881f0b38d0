"""What the OpenAPI schema (`/api/schema/`) says beyond what drf-spectacular reads from a view.

- The two bearer tokens as security schemes, so every operation declares the
  credentials it takes: `projectToken` (a project's ingest token, `manage.py
  issue_token`) and `personalToken` (`wlu_…`, `manage.py api_token`), besides the
  session cookie the console's own pages use.
- The error body every 4xx answers with (`ErrorBody`), and `errors(...)` for a
  view to list the statuses it answers.
- `add_common_responses`, a postprocessing hook: the statuses the request guard
  (`opsconsole/request_guard.py`) and authentication answer on every operation
  (400 for a NUL in the URL, 401, 413, 415), so no operation omits them; the
  constraints the serializers cannot state (no NUL in a free query string, a
  non-empty project, a schedule's every_steps or every_hours, required bodies)
  and the state refusals each operation may answer with its 400.
- The Alertmanager webhook's payload and the rules API's statuses, documented
  here (view extensions) rather than in those modules.

The API views import `errors` from here, so the extensions are registered before any schema is generated.
"""
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiViewExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers

from ingest.contract import MAX_ERRORS


class _BearerToken(OpenApiAuthenticationExtension):
    """A token sent as `Authorization: Bearer …` (matches no class itself: target_class is None)."""

    description = ""

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": self.description}


class ProjectTokenScheme(_BearerToken):
    target_class = "ingest.auth.ProjectTokenAuthentication"
    name = "projectToken"
    description = "A project's ingest token (`manage.py issue_token`): sends telemetry to, and reads, its one project."


class PersonalTokenScheme(_BearerToken):
    target_class = "ingest.auth.PersonalTokenAuthentication"
    name = "personalToken"
    description = "A user's personal token (`wlu_…`, `manage.py api_token`): acts with that user's roles."


class ErrorSerializer(serializers.Serializer):
    path = serializers.CharField(allow_blank=True, help_text="the field, parameter or header at fault (`points[3].value`, "
                                 "`lines[7].step`, `metric`, `Content-Encoding`); empty for the request as a whole")
    message = serializers.CharField(help_text="what is wrong, in words a person can act on")


class ErrorBodySerializer(serializers.Serializer):
    errors = ErrorSerializer(many=True, help_text=f"at most the first {MAX_ERRORS} errors")
    more_errors = serializers.IntegerField(required=False, min_value=1, help_text=f"how many errors after the first {MAX_ERRORS}")

    class Meta:
        ref_name = "ErrorBody"


DESCRIPTIONS = {
    400: "A bad field, query parameter, header or body (JSON nested over 64 levels, a NUL character, a number beyond "
         "the 64-bit float range): each error names its path.",
    401: "No credentials, an unknown or revoked token, or a valid token of the kind the operation does not take (a "
         "personal token on ingest; the message names both kinds) (path `Authorization`).",
    403: "The caller may not do this (a viewer or a project token acting on an alert; a run of another project).",
    404: "Not found, or not in a project the caller may see.",
    409: "The state of the resource forbids it.",
    413: "The body is over 4 MiB (after any gzip Content-Encoding), or holds more items than one request may.",
    415: "A Content-Type or Content-Encoding the operation does not take (path names the header).",
    429: "Too many failed authentications with this token or from this address (path `Authorization`); "
         "the `Retry-After` header says in how many seconds to try again.",
    503: "The database is down or restarting (or the reads' share of it stayed busy): nothing to fix in the "
         "request; the `Retry-After` header says in how many seconds to send it again.",
}


def errors(*statuses, **described) -> dict:
    """`{status: response}` in the error body, for `extend_schema(responses=…)`; described={"s403": "…"} overrides a text."""
    return {
        status: OpenApiResponse(ErrorBodySerializer, description=described.get(f"s{status}", DESCRIPTIONS[status]))
        for status in statuses
    }


# Every operation may answer these: the request guard runs before any view, and every view authenticates.
COMMON = (400, 401, 413, 415, 429, 503)


# Operations that take nothing without a body (others answer an empty body by its fields).
BODY_REQUIRED = {"ingest", "alertmanager", "rules_create", "rules_update", "alerts_mute", "alerts_verdict",
                 "incidents_mute", "incidents_verdict", "mutes_comment", "mutes_extend", "channels_create",
                 "rules_backtest"}

# The request guard refuses a NUL anywhere in the URL (PostgreSQL cannot store it); a query parameter whose
# schema has no pattern of its own says so with this one (the patterns of the others exclude it already).
NO_NUL = "^[^\u0000]*$"

# Operations the state of a resource can refuse, with a 400 naming the field (not 409: the caller fixes the
# request it sent, e.g. another alert or a later step, and every other refusal of these bodies is a 400 too).
STATE_REFUSALS = {
    "alerts_acknowledge": "a resolved alert", "alerts_mute": "a resolved alert",
    "alerts_new_normal": "an alert that is not an open alert of a band rule",
    "incidents_acknowledge": "a resolved incident", "incidents_mute": "a resolved incident",
    "mutes_end": "a mute that is no longer active", "mutes_extend": "a mute that is no longer active, or past the "
    "project's limit unless a rule admin extends it",
    "reviews_check_step": "a decided review", "reviews_compare": "a decided review, or the review's own run",
    "reviews_decide": "a review decided already", "decisions_create": "a correction of an entry that does not exist",
}


def _constrain_bodies(schemas):
    """What the serializers cannot say of their request bodies: a project slug is never empty, and a schedule
    names every_steps, every_hours or both (null for both removes it; a body naming neither is refused)."""
    for name, schema in schemas.items():
        project = schema.get("properties", {}).get("project")
        if project and not schema.get("readOnly") and project.get("pattern") == "^[-a-zA-Z0-9_]+$":
            project.setdefault("minLength", 1)
    if "Schedule" in schemas:
        schemas["Schedule"]["anyOf"] = [{"required": ["every_steps"]}, {"required": ["every_hours"]}]


def add_common_responses(result, generator, request, public):
    error_body = {"$ref": "#/components/schemas/ErrorBody"}
    _constrain_bodies(result.get("components", {}).get("schemas", {}))
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if operation.get("operationId") in BODY_REQUIRED:
                operation["requestBody"]["required"] = True
            for parameter in operation.get("parameters", []):
                free = parameter["schema"]
                if parameter["in"] == "query" and free.get("type") == "string" and not ({"pattern", "enum", "format"} & set(free)):
                    free["pattern"] = NO_NUL
            refused_by = STATE_REFUSALS.get(operation.get("operationId"))
            if refused_by:
                refused = operation.setdefault("responses", {}).setdefault("400", {
                    "description": DESCRIPTIONS[400], "content": {"application/json": {"schema": error_body}}})
                refused["description"] += f" Also refused, naming the field, on {refused_by}."
            responses = operation.setdefault("responses", {})
            for status in COMMON:
                responses.setdefault(str(status), {
                    "description": DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": error_body}},
                    **({"headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}}} if status in (429, 503) else {}),
                })
    return result


# Views of other modules, documented from here: their request bodies and every status they answer.

# Only what the webhook refuses a whole notification for is typed: an alert it cannot read is
# judged on its own (issue 9: the valid ones beside it are kept), so its fields are described, not typed.
ALERTMANAGER_PAYLOAD = {
    "type": "object",
    "required": ["version", "alerts"],
    "description": "Prometheus Alertmanager's webhook payload, version 4, as `webhook_configs` send it.",
    "properties": {
        "version": {"type": "string", "enum": ["4"]},
        "alerts": {
            "type": "array",
            "items": {"description": "an alert: status (firing, resolved), labels (run, component/instance/gpu, "
                                     "condition, step, magnitude), annotations, startsAt, endsAt, fingerprint"},
        },
    },
}
RULE_REQUEST = {
    "type": "object",
    "required": ["project", "name", "kind", "owner", "scope", "persistence", "diagnostic_url", "permitted_response"],
    "description": "Governance fields are required on every path. Beyond this schema: `stop` and `rewind` only on "
                   "nonfinite and absence rules, names unique in a project, each kind's params, and the rule admin role.",
    "properties": {
        "project": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$", "minLength": 1, "maxLength": 64},
        "name": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$", "maxLength": 100},
        "kind": {"type": "string", "enum": ["nonfinite", "threshold", "band", "absence", "event", "divergence"]},
        "description": {"type": "string"},
        "owner": {"type": "string", "pattern": "^\\s*[^<>]+?\\s*<[^<>]+>\\s*$", "maxLength": 300,
                  "description": "NAME <CONTACT>"},
        "scope": {"type": "object", "minProperties": 1, "description": "metrics or conditions, and optionally runs, "
                  "component, layer, phases"},
        "persistence": {"type": "object", "minProperties": 1, "description": "exactly one of points, steps, seconds; "
                        "optionally resolve_points"},
        "diagnostic_url": {"type": "string", "pattern": "^https?://\\S+$", "maxLength": 500},
        "permitted_response": {"type": "string", "enum": ["observe", "notify", "review", "stop", "rewind"]},
        "params": {"type": "object"},
        "enabled": {"type": "boolean"},
    },
}


class AlertmanagerViewSchema(OpenApiViewExtension):
    target_class = "ingest.api.AlertmanagerView"

    def view_replacement(self):
        from drf_spectacular.types import OpenApiTypes

        return extend_schema_view(post=extend_schema(
            operation_id="alertmanager",
            request={"application/json": {**ALERTMANAGER_PAYLOAD}},
            responses={202: OpenApiTypes.OBJECT, **errors(403, s403="a run label names a run of another project")},
        ))(type("AlertmanagerView", (self.target,), {}))


class RuleViewSetSchema(OpenApiViewExtension):
    target_class = "alerts.api.RuleViewSet"

    def view_replacement(self):
        rule = self.target.serializer_class
        rule_id = OpenApiParameter("id", int, OpenApiParameter.PATH, description="rule id")
        edit = errors(403, 404, s403="editing rules needs the rule admin role in the rule's project")
        partial = {**RULE_REQUEST, "required": []}
        return extend_schema_view(
            list=extend_schema(operation_id="rules_list", parameters=[OpenApiParameter("project", str, description="project slug")]),
            create=extend_schema(operation_id="rules_create", request={"application/json": RULE_REQUEST},
                                 responses={201: rule, **errors(403, s403=edit[403].description)}),
            retrieve=extend_schema(operation_id="rules_retrieve", parameters=[rule_id], responses={200: rule, **errors(404)}),
            update=extend_schema(operation_id="rules_update", parameters=[rule_id], request={"application/json": RULE_REQUEST},
                                 responses={200: rule, **edit}),
            partial_update=extend_schema(operation_id="rules_partial_update", parameters=[rule_id],
                                         request={"application/json": partial}, responses={200: rule, **edit}),
            destroy=extend_schema(operation_id="rules_destroy", parameters=[rule_id], responses={204: None, **edit, **errors(
                409, s409="the rule has alerts: disable it (PATCH enabled=false) instead")}),
        )(type("RuleViewSet", (self.target,), {}))
