"""The alerts app's DRF views: rules (CRUD), alerts of a run (contract v1), one alert with its history, the inbox across runs, and acting on an alert.

Members of a project (and its project token) read; on-call and rule admins act
(`can_triage`, the helper the inbox page uses too), rule admins edit rules
(`can_edit_rules`); a viewer or a project token acting gets 403, anyone outside
the project 404. Bad input is a 400 naming the field, in the API's error format.
"""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from alerts import backtest_jobs, faults, incident_actions, incidents, rebaseline, tasks, triage
from alerts.models import (
    Alert, AlertState, ChangeKind, IncidentState, MUTE_DURATION_CEILING, Mute, MuteEndReason, MuteScope, PermittedResponse, Rule, Verdict,
)
from alerts.rules import delete_rule, EDIT_DENIED
from alerts.serializers import BacktestJobSerializer, BacktestRequestSerializer, RuleSerializer
from alerts.wire import alert_as_dict, change_as_dict
from ingest.contract import RUN_ID_RE
from ingest.serializers import pattern_field, read_query, RunQuerySerializer
from opsconsole.pagination import Pagination, paginated
from opsconsole.permissions import can_edit_rules, can_triage, rule_admin_projects, visible_projects, visible_runs
from opsconsole.request_guard import BoundedJSONParser
from opsconsole.schema import errors


class RuleInUse(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "this rule has alerts; disable it instead (PATCH enabled=false) to keep their history"
    default_code = "rule_in_use"


BACKTEST_DENIED = "starting a backtest needs the rule admin role in the rule's project; members may read backtests"


class TooManyBacktests(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_backtests"


class EditsNeedRuleAdmin(permissions.BasePermission):
    """Changing a rule needs the rule admin role in its project, checked before the body is looked at."""

    message = EDIT_DENIED

    def has_object_permission(self, request, view, obj):
        return request.method in permissions.SAFE_METHODS or can_edit_rules(request.user, obj.project)


class RuleViewSet(viewsets.ModelViewSet):
    """Alert rules: members read them; rule admins of the rule's project create, edit and delete.

    The project a rule is created in (or moved to) is checked as the body is
    validated (RuleSerializer.validate_project): a project the caller cannot see
    does not exist, one it may not edit is a 403, before a name's uniqueness.
    """

    serializer_class = RuleSerializer
    pagination_class = Pagination
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, EditsNeedRuleAdmin]

    def get_queryset(self):
        rules = Rule.objects.filter(project__in=visible_projects(self.request.user)).select_related("project")
        if self.request.query_params.get("project"):
            rules = rules.filter(project__slug=self.request.query_params["project"])
        return faults.with_health(rules)

    @extend_schema(
        operation_id="rules_backtest", request=BacktestRequestSerializer,
        responses={202: BacktestJobSerializer, **errors(
            400, 403, 404, 429, s403="The caller is not a rule admin of the rule's project (viewers, on-call, project tokens).",
            s429="The project has BACKTEST_MAX_PER_PROJECT backtests queued or running already.")},
    )
    # JSON only: the rule's scope and the tags are nested objects, which have no form encoding.
    @action(detail=False, methods=["post"], url_path="backtest", parser_classes=[BoundedJSONParser])
    def backtest(self, request):
        """Start a backtest: what a rule would have fired on stored runs, replayed by the live engine's code, saving nothing.

        The rule: `"rule": <id>` for a saved one, or a draft given by the fields `POST /api/v1/rules/` takes
        (validated the same way: governance and params errors are a 400 naming the field; its name may be
        taken); `compare_with: <id>` names the saved rule a draft edits, replayed over the same runs so that
        `result.compared` says what the edit changes. The runs: `runs` (ids), or the rule's project's runs
        filtered by `tags` and `since`/`until`; at most 200 (more is a 400 on `runs`). Only the rule admins of the rule's project start one (others,
        and project tokens, get 403); a saved rule in a project the caller cannot see is a 404, a draft's
        unknown project a 400. A project has at most BACKTEST_MAX_PER_PROJECT backtests queued or running:
        one more is a 429. The answer is 202 with the job (`Location`: its URL); GET it until its `state` is
        `done`, `cut` (its budget of time or points ran out: `result.cut` says how far it got) or `failed`;
        meanwhile `progress` counts the runs replayed.
        """
        if not rule_admin_projects(request.user).exists():  # viewers and job tokens: refused before the body is read
            raise exceptions.PermissionDenied(BACKTEST_DENIED)
        asked = BacktestRequestSerializer(data=request.data, context=self.get_serializer_context())
        asked.is_valid(raise_exception=True)
        rule, runs = asked.rule_and_runs()
        if not can_edit_rules(request.user, rule.project):
            raise exceptions.PermissionDenied(BACKTEST_DENIED)
        compared_with = asked.compared_rule(rule)
        selection = {k: request.data[k] for k in ("runs", "tags", "since", "until") if k in request.data}
        try:
            job = tasks.start_backtest(request.user, rule, runs, selection, compared_with=compared_with)
        except backtest_jobs.TooManyBacktests as exc:
            raise TooManyBacktests(str(exc)) from None
        body = backtest_jobs.as_dict(job)
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    def perform_destroy(self, instance):
        try:
            delete_rule(instance, user=self.request.user, source="api")
        except ProtectedError:
            # Its alerts are history (verdicts, mutes, audit): a rule that fired is disabled, not deleted.
            raise RuleInUse() from None


class BacktestJobView(APIView):
    @extend_schema(operation_id="backtests_retrieve", responses={200: BacktestJobSerializer, **errors(404)})
    def get(self, request, pk):
        """One backtest: who started it, what it judges, its state, and when done (or cut) its result.

        Members of the project and its project token read it; anyone else gets 404."""
        job = backtest_jobs.visible(request.user, pk)
        if job is None:
            raise exceptions.NotFound("no such backtest")
        return Response(backtest_jobs.as_dict(job))


class _RuleRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    owner = serializers.CharField()
    permitted_response = serializers.CharField()
    diagnostic_url = serializers.CharField()


class AlertSerializer(serializers.Serializer):
    """The shape of `alert_as_dict` (what the schema documents; the view builds the dict itself)."""

    id = serializers.IntegerField()
    run = serializers.CharField()
    rule = _RuleRefSerializer()
    component = serializers.CharField(allow_null=True)
    metric = serializers.CharField(allow_null=True)
    condition = serializers.CharField(allow_null=True)
    step = serializers.IntegerField(help_text="the first step the condition held")
    last_step = serializers.IntegerField()
    fired_step = serializers.IntegerField(allow_null=True)
    magnitude = serializers.JSONField(allow_null=True, help_text='a number, or "NaN", "Infinity", "-Infinity"')
    magnitude_unit = serializers.CharField(allow_blank=True)
    phase = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(AlertState.values)
    verdict = serializers.CharField(allow_blank=True, allow_null=True)
    fired_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)


class AlertListView(APIView):
    pagination_class = Pagination

    @extend_schema(operation_id="alerts_list", parameters=[RunQuerySerializer], responses={200: AlertSerializer(many=True), **errors(404)})
    def get(self, request):
        """The alerts of a run, oldest first (contract v1), a page at a time: {count, next, previous, results}."""
        run_id = read_query(request, RunQuerySerializer)["run"]
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        alerts = Alert.objects.filter(run=run).select_related("rule", "run").order_by("fired_at", "id")
        return paginated(request, self, alerts, alert_as_dict)


class ChangeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(ChangeKind.values)
    step = serializers.IntegerField(allow_null=True)
    at = serializers.DateTimeField()
    by = serializers.CharField(allow_null=True, help_text="who; null for the console's own rows")
    note = serializers.CharField(allow_blank=True)
    verdict = serializers.CharField(allow_null=True)


class MuteSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField()
    scope = serializers.ChoiceField(MuteScope.values)
    rule = serializers.IntegerField()
    run = serializers.CharField(allow_null=True)
    component = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    expires_at = serializers.DateTimeField()
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    ended_by = serializers.CharField(allow_null=True, help_text="who ended it; null when it expired or ended itself")
    end_reason = serializers.ChoiceField(MuteEndReason.values, allow_null=True)
    extends = serializers.IntegerField(allow_null=True, help_text="the mute this one extended (replaced)")
    over_limit = serializers.BooleanField(help_text="longer than the project's limit when made (a rule admin's)")
    active = serializers.BooleanField()


class MuteCommentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    by = serializers.CharField(allow_null=True, help_text="who; null for the console's own notes")
    at = serializers.DateTimeField()
    text = serializers.CharField()


class MuteHoldSerializer(serializers.Serializer):
    alert = serializers.IntegerField()
    at = serializers.DateTimeField(help_text="when this mute muted it (or took it over, for an extension)")


class MuteEventSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(["created", "extended", "ended"])
    at = serializers.DateTimeField()
    by = serializers.CharField(allow_null=True)
    note = serializers.CharField(allow_blank=True)


class MuteDetailSerializer(MuteSerializer):
    extended_by = serializers.IntegerField(allow_null=True, help_text="the mute that replaced this one")
    comments = MuteCommentSerializer(many=True)
    holds = MuteHoldSerializer(many=True)
    history = MuteEventSerializer(many=True)


class InboxItemSerializer(AlertSerializer):
    project = serializers.CharField()


class AlertDetailSerializer(InboxItemSerializer):
    changes = ChangeSerializer(many=True)
    mutes = MuteSerializer(many=True, help_text="the active mutes covering the alert")


class ActionResultSerializer(serializers.Serializer):
    alert = AlertDetailSerializer()
    change = ChangeSerializer(allow_null=True, help_text="null when nothing changed (acknowledged or resolved already)")


class MuteResultSerializer(serializers.Serializer):
    alert = AlertDetailSerializer()
    mute = MuteSerializer()
    muted = serializers.ListField(child=serializers.IntegerField(), help_text="ids of the open alerts it muted")


def mute_as_dict(mute: Mute, now=None) -> dict:
    now = now or timezone.now()
    return {
        "id": mute.pk,
        "project": mute.project.slug,
        "scope": mute.scope,
        "rule": mute.rule_id,
        "run": mute.run.run_id if mute.run_id else None,
        "component": mute.component if mute.scope == "component" else None,
        "reason": mute.reason,
        "expires_at": mute.expires_at,
        "created_by": mute.created_by.get_username() if mute.created_by_id else None,
        "created_at": mute.created_at,
        "ended_at": mute.ended_at,
        "ended_by": mute.ended_by.get_username() if mute.ended_by_id else None,
        "end_reason": mute.end_reason or None,
        "extends": mute.extends_id,
        "over_limit": mute.over_limit,
        "active": mute.ended_at is None and mute.expires_at > now,
    }


def _who(user):
    return user.get_username() if user else None


def mute_detail(mute: Mute) -> dict:
    """A mute with its comment log, the alerts it held, and its history (made, extended, ended)."""
    extension = mute.extensions.order_by("id").first()
    history = [{"kind": "created", "at": mute.created_at, "by": _who(mute.created_by),
                "note": f"extends mute #{mute.extends_id}" if mute.extends_id else ""}]
    if mute.ended_at is not None:
        kind = "extended" if mute.end_reason == MuteEndReason.REPLACED else "ended"
        note = MuteEndReason(mute.end_reason).label if mute.end_reason else ""
        if extension is not None:
            note = f"replaced by mute #{extension.pk}"
        history.append({"kind": kind, "at": mute.ended_at, "by": _who(mute.ended_by), "note": note})
    return {
        **mute_as_dict(mute),
        "extended_by": extension.pk if extension else None,
        "comments": [{"id": c.pk, "by": _who(c.by), "at": c.at, "text": c.text}
                     for c in mute.comments.select_related("by")],
        "holds": [{"alert": h.alert_id, "at": h.at} for h in mute.holds.all()],
        "history": history,
    }


def inbox_item(alert: Alert) -> dict:
    return {**alert_as_dict(alert), "project": alert.run.project.slug}


def alert_detail(alert: Alert) -> dict:
    now = timezone.now()
    mutes = Mute.objects.active(now).covering(alert).select_related("project", "run", "created_by")
    return {
        **inbox_item(alert),
        "changes": [change_as_dict(c) for c in alert.changes.select_related("by").order_by("id")],
        "mutes": [mute_as_dict(m, now) for m in mutes],
    }


def _body(request) -> dict:
    if not isinstance(request.data, dict):
        raise exceptions.ValidationError({"": "the body must be a JSON object"})
    return request.data


class AlertDetailView(APIView):
    @extend_schema(operation_id="alerts_retrieve", responses={200: AlertDetailSerializer, **errors(404)})
    def get(self, request, pk):
        """One alert with every change (kind, step, who, when, note, verdict) and the active mutes covering it."""
        return Response(alert_detail(triage.visible_alert(request.user, pk)))


class _AlertActionView(APIView):
    created_status = status.HTTP_200_OK

    def act(self, alert, user, body) -> dict:
        raise NotImplementedError

    @extend_schema(responses={200: ActionResultSerializer, **errors(403, 404)})
    def post(self, request, pk):
        alert = triage.visible_alert(request.user, pk)
        if not can_triage(request.user, alert.run.project):
            raise exceptions.PermissionDenied("acting on alerts needs the on-call or rule admin role in this project")
        try:
            result = self.act(alert, request.user, _body(request))
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from None
        alert.refresh_from_db(fields=["state", "verdict", "resolved_at", "last_step", "magnitude"])
        return Response({"alert": alert_detail(alert), **result}, status=self.created_status)


# The action bodies as the schema documents them; alerts/triage.py checks them (for the inbox page too).
# What a schema cannot say: the alert's state (a resolved alert cannot be acknowledged or muted) and a
# mute's expiry window (in the future, at most 7 days ahead).
_NOTE = {"type": "string", "maxLength": triage.MAX_TEXT, "pattern": "^[^\\u0000]*$"}
_SAID = {**_NOTE, "pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$", "description": "not blank"}
RESOLVE_BODY = {"type": "object", "properties": {"note": {**_NOTE, "nullable": True}}}
VERDICT_BODY = {
    "type": "object",
    "required": ["verdict"],
    "oneOf": [
        {"properties": {"verdict": {"enum": ["actionable"]}, "note": {**_NOTE, "nullable": True}}},
        {"properties": {"verdict": {"enum": ["false_alarm"]}, "note": _SAID}, "required": ["note"],
         "description": "a false alarm needs a note saying why"},
    ],
    "properties": {"verdict": {"type": "string", "enum": Verdict.values}, "note": {**_NOTE, "nullable": True}},
}
MUTE_BODY = {
    "type": "object",
    "required": ["scope", "reason"],
    "properties": {
        "scope": {"type": "string", "enum": MuteScope.values},
        "reason": _SAID,
        "expires_at": {"type": "string", "format": "date-time", "description": "in the future, at most the project's limit ahead (7 days unless set; past it, a rule admin only)"},
        "duration_minutes": {"type": "integer", "minimum": 1, "maximum": int(MUTE_DURATION_CEILING.total_seconds() // 60),
                             "description": "at most the project's limit (7 days unless set); past it, a rule admin only"},
    },
    "oneOf": [{"required": ["expires_at"]}, {"required": ["duration_minutes"]}],
}


@extend_schema_view(post=extend_schema(operation_id="alerts_acknowledge", request=None))
class AcknowledgeView(_AlertActionView):
    """Firing or muted → acknowledged; `change` is null when it was acknowledged already."""

    def act(self, alert, user, body):
        change = triage.acknowledge(alert, user)
        return {"change": change and change_as_dict(change)}


@extend_schema_view(post=extend_schema(operation_id="alerts_resolve", request={"application/json": RESOLVE_BODY}))
class ResolveView(_AlertActionView):
    """Resolve by hand, with an optional `note`; `change` is null when it was resolved already."""

    def act(self, alert, user, body):
        change = triage.resolve(alert, user, note=body.get("note"))
        return {"change": change and change_as_dict(change)}


NEW_NORMAL_BODY = {"type": "object", "required": ["note"], "properties": {"note": _SAID}}


@extend_schema_view(post=extend_schema(operation_id="alerts_new_normal", request={"application/json": NEW_NORMAL_BODY}))
class NewNormalView(_AlertActionView):
    """A band alert's level is the run's new normal: resolved, and its band starts again from the next points.
    `note` (why) is required; the `new_normal` change row records who said so. Refused (400) for an alert that is
    resolved or whose rule learns no level (not a band rule)."""

    def act(self, alert, user, body):
        change = rebaseline.accept_new_normal(alert, user, body.get("note"))
        return {"change": change_as_dict(change)}


@extend_schema_view(post=extend_schema(operation_id="alerts_verdict", request={"application/json": VERDICT_BODY}))
class VerdictView(_AlertActionView):
    """{"verdict": "actionable" | "false_alarm", "note": …} (a note is required for a false alarm)."""

    def act(self, alert, user, body):
        change = triage.give_verdict(alert, user, body.get("verdict"), body.get("note"))
        return {"change": change_as_dict(change)}


@extend_schema_view(post=extend_schema(operation_id="alerts_mute", request={"application/json": MUTE_BODY},
                                       responses={201: MuteResultSerializer, **errors(403, 404)}))
class MuteView(_AlertActionView):
    """{"scope": "rule" | "run" | "component", "reason": …, "expires_at": ISO 8601 | "duration_minutes": N}."""

    created_status = status.HTTP_201_CREATED

    def act(self, alert, user, body):
        mute = triage.mute(alert, user, body.get("scope"), body.get("reason"), body.get("expires_at"),
                           duration_minutes=body.get("duration_minutes"))
        return {"mute": mute_as_dict(mute), "muted": mute.muted}


class InboxPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 500

    def get_paginated_response_schema(self, schema):
        answer = super().get_paginated_response_schema(schema)
        answer["properties"]["needs_review"] = {
            "type": "array", "items": {"type": "string"},
            "description": "run ids, sorted, of the runs with an alert that ended with nobody's word on it (no verdict, "
                           "acknowledgement or decision): what the inbox page marks \"needs review\". Filled for "
                           "state=open (the default view), as the page does; empty for any other state.",
        }
        answer["required"] = [*answer.get("required", []), "needs_review"]
        return answer


class InboxQuerySerializer(serializers.Serializer):
    state = serializers.ChoiceField(triage.INBOX_STATES, required=False, default="open")
    project = serializers.SlugField(required=False, max_length=64, help_text="project slug")
    rule = serializers.IntegerField(required=False, min_value=1, max_value=triage.MAX_ID, help_text="rule id")
    run = pattern_field(RUN_ID_RE, "run", 128, required=False, help_text="run id")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=InboxPagination.max_limit,
                                     default=InboxPagination.default_limit)
    offset = serializers.IntegerField(required=False, min_value=0, max_value=triage.MAX_ID, default=0)


class InboxView(APIView):
    pagination_class = InboxPagination

    @extend_schema(operation_id="inbox_list", parameters=[InboxQuerySerializer], responses=InboxItemSerializer(many=True))
    def get(self, request):
        """Alerts across the runs the caller may see, newest first: {count, next, previous, results, needs_review}."""
        query = read_query(request, InboxQuerySerializer)
        alerts = triage.inbox_alerts(request.user, state=query["state"], project=query.get("project"),
                                     rule=query.get("rule"), run=query.get("run"))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(alerts, request, view=self)
        response = paginator.get_paginated_response([inbox_item(a) for a in page])
        # The runs the page marks "needs review" (their alerts are no longer open, so no row above names them).
        response.data["needs_review"] = triage.inbox_runs_needing_review(
            request.user, project=query.get("project"), rule=query.get("rule"), run=query.get("run")) if query["state"] == "open" else []
        return response


# --- incidents: alerts of one fault, with one named origin (alerts/incidents.py) ---------------------------

class _OriginSerializer(serializers.Serializer):
    alert = serializers.IntegerField(help_text="the alert named as the origin")
    rule = serializers.CharField(help_text="its rule's name")
    metric = serializers.CharField(allow_null=True)
    component = serializers.CharField(allow_null=True, help_text="null: the whole run")
    step = serializers.IntegerField(help_text="the first step its condition held")


class _ReachSerializer(serializers.Serializer):
    metric = serializers.CharField(allow_null=True)
    component = serializers.CharField(allow_null=True)


class IncidentSerializer(serializers.Serializer):
    """The shape of `incidents.incident_as_dict`."""

    id = serializers.IntegerField()
    run = serializers.CharField()
    state = serializers.ChoiceField(IncidentState.values, help_text=(
        "firing while an alert of it fires; else acknowledged, else muted; needs_review while every condition "
        "cleared but a hard invariant (non-finite, absence) of it waits for a person; else resolved"))
    severity = serializers.ChoiceField(PermittedResponse.values, help_text="the highest permitted response among its alerts")
    first_step = serializers.IntegerField()
    origin = _OriginSerializer(allow_null=True, help_text=(
        "judged by causal order (weights, activations, gradients, loss, the rest), then the earliest step, "
        "then the magnitude beyond the band"))
    alerts = serializers.ListField(child=serializers.IntegerField(), help_text="its alerts' ids (GET /api/v1/alerts/?run=)")
    blast_radius = _ReachSerializer(many=True, help_text="the other metrics and components its alerts name")
    opened_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True, help_text="when its last alert's condition cleared")


class IncidentListView(APIView):
    pagination_class = Pagination

    @extend_schema(operation_id="incidents_list", parameters=[RunQuerySerializer],
                   responses={200: IncidentSerializer(many=True), **errors(404)})
    def get(self, request):
        """The incidents of a run, oldest first: its alerts grouped by fault, each with one named origin (paged)."""
        run_id = read_query(request, RunQuerySerializer)["run"]
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        paginator = Pagination()
        page = incidents.with_alert_lists(paginator.paginate_queryset(incidents.run_incidents(run), request, view=self))
        return paginator.get_paginated_response([incidents.incident_as_dict(i, i.alert_list) for i in page])


class IncidentActionResultSerializer(serializers.Serializer):
    incident = IncidentSerializer()
    changes = ChangeSerializer(many=True, help_text="each alert's own new row (empty when nothing changed)")


class IncidentMuteResultSerializer(serializers.Serializer):
    incident = IncidentSerializer()
    mutes = MuteSerializer(many=True, help_text="one per rule (rule and run scopes) or per component")
    muted = serializers.ListField(child=serializers.IntegerField(), help_text="ids of the open alerts they muted")


class _IncidentActionView(APIView):
    created_status = status.HTTP_200_OK

    def act(self, incident, user, body) -> dict:
        raise NotImplementedError

    @extend_schema(responses={200: IncidentActionResultSerializer, **errors(403, 404)})
    def post(self, request, pk):
        incident = incidents.visible_incident(request.user, pk)
        if not can_triage(request.user, incident.run.project):
            raise exceptions.PermissionDenied("acting on incidents needs the on-call or rule admin role in this project")
        try:
            result = self.act(incident, request.user, _body(request))
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from None
        incident = incidents.visible_incident(request.user, pk)
        return Response({"incident": incidents.incident_as_dict(incident), **result}, status=self.created_status)


@extend_schema_view(post=extend_schema(operation_id="incidents_acknowledge", request=None))
class IncidentAcknowledgeView(_IncidentActionView):
    """Acknowledge each of its alerts that is open (or a hard invariant waiting for review), one row each."""

    def act(self, incident, user, body):
        return {"changes": [change_as_dict(c) for c in incident_actions.acknowledge_incident(incident, user)]}


@extend_schema_view(post=extend_schema(operation_id="incidents_verdict", request={"application/json": VERDICT_BODY}))
class IncidentVerdictView(_IncidentActionView):
    """The same verdict on each of its alerts, one row each (a note is required for a false alarm)."""

    def act(self, incident, user, body):
        rows = incident_actions.give_incident_verdict(incident, user, body.get("verdict"), body.get("note"))
        return {"changes": [change_as_dict(c) for c in rows]}


@extend_schema_view(post=extend_schema(operation_id="incidents_mute", request={"application/json": MUTE_BODY},
                                       responses={201: IncidentMuteResultSerializer, **errors(403, 404)}))
class IncidentMuteView(_IncidentActionView):
    """Mute the rules of its open alerts at one scope, until one expiry; each alert muted gets its own row."""

    created_status = status.HTTP_201_CREATED

    def act(self, incident, user, body):
        mutes = incident_actions.mute_incident(incident, user, body.get("scope"), body.get("reason"), body.get("expires_at"),
                                        duration_minutes=body.get("duration_minutes"))
        return {"mutes": [mute_as_dict(m) for m in mutes], "muted": sorted(pk for m in mutes for pk in m.muted)}


# --- mutes ---------------------------------------------------------------------

def visible_mute(user, pk) -> Mute:
    """The mute if the caller may see its project; 404 otherwise."""
    mutes = Mute.objects.filter(project__in=visible_projects(user)).select_related("project", "run", "created_by", "ended_by")
    return get_object_or_404(mutes, pk=pk)


class MuteDetailView(APIView):
    @extend_schema(operation_id="mutes_retrieve", responses={200: MuteDetailSerializer, **errors(404)})
    def get(self, request, pk):
        """One mute: who made it, why, its scope and window, who ended it and why, its comments, the alerts it held."""
        return Response(mute_detail(visible_mute(request.user, pk)))


class _MuteActionView(APIView):
    created_status = status.HTTP_200_OK

    def act(self, mute, user, body) -> Mute:
        raise NotImplementedError

    def post(self, request, pk):
        mute = visible_mute(request.user, pk)
        if not can_triage(request.user, mute.project):
            raise exceptions.PermissionDenied("acting on mutes needs the on-call or rule admin role in this project")
        try:
            result = self.act(mute, request.user, _body(request))
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from None
        return Response(mute_detail(visible_mute(request.user, result.pk)), status=self.created_status)


COMMENT_BODY = {"type": "object", "required": ["text"], "properties": {"text": _SAID}}
EXTEND_BODY = {
    "type": "object",
    "required": ["reason"],
    "properties": {k: MUTE_BODY["properties"][k] for k in ("reason", "expires_at", "duration_minutes")},
    "oneOf": MUTE_BODY["oneOf"],
}


@extend_schema_view(post=extend_schema(operation_id="mutes_comment", request={"application/json": COMMENT_BODY},
                                       responses={201: MuteDetailSerializer, **errors(403, 404)}))
class MuteCommentView(_MuteActionView):
    """Add {"text": …} to the mute's comment log (ended or not); the mute comes back with its comments."""

    created_status = status.HTTP_201_CREATED

    def act(self, mute, user, body):
        triage.comment_on_mute(mute, user, body.get("text"))
        return mute


@extend_schema_view(post=extend_schema(operation_id="mutes_extend", request={"application/json": EXTEND_BODY},
                                       responses={201: MuteDetailSerializer, **errors(403, 404)}))
class MuteExtendView(_MuteActionView):
    """Replace an active mute with a new one of its scope ({"reason", "expires_at" | "duration_minutes"}): the old
    one ends (end_reason replaced); the new one, returned, names it in `extends`. An ended mute is a 400 on state."""

    created_status = status.HTTP_201_CREATED

    def act(self, mute, user, body):
        return triage.extend_mute(mute, user, body.get("reason"), body.get("expires_at"),
                                  duration_minutes=body.get("duration_minutes"))


@extend_schema_view(post=extend_schema(operation_id="mutes_end", request=None,
                                       responses={200: MuteDetailSerializer, **errors(403, 404)}))
class MuteEndView(_MuteActionView):
    """End an active mute now (ended_by, end_reason ended_by_person): its alerts fire again, as at expiry.
    An ended mute is a 400 on state."""

    def act(self, mute, user, body):
        return triage.end_mute(mute, user)
