"""Alert API beyond the contract: one alert with its history, the inbox across runs, and acting on an alert.

Members of the alert's project (and its project token) read; on-call and rule
admins act (`can_triage`, the helper the inbox page uses too); a viewer or a
project token acting gets 403, anyone outside the project 404. Bad input is a
400 naming the field, in the API's error format.
"""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts import triage
from alerts.alert_views import alert_as_dict
from alerts.models import Alert, Mute
from ingest.contract import RUN_ID_RE
from ingest.serializers import pattern_field, read_query
from opsconsole.permissions import can_triage, visible_projects


def change_as_dict(change) -> dict:
    return {
        "id": change.pk,
        "kind": change.kind,
        "step": change.step,
        "at": change.at,
        "by": change.by.get_username() if change.by_id else None,
        "note": change.note,
        "verdict": change.verdict or None,
    }


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
        "active": mute.ended_at is None and mute.expires_at > now,
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


def visible_alert(user, pk) -> Alert:
    """The alert if the caller may see its run's project; 404 otherwise (its existence is not revealed)."""
    alerts = Alert.objects.filter(run__project__in=visible_projects(user)).select_related("rule", "run__project")
    return get_object_or_404(alerts, pk=pk)


def _body(request) -> dict:
    if not isinstance(request.data, dict):
        raise exceptions.ValidationError({"": "the body must be a JSON object"})
    return request.data


class AlertDetailView(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk):
        """One alert with every change (kind, step, who, when, note, verdict) and the active mutes covering it."""
        return Response(alert_detail(visible_alert(request.user, pk)))


class _AlertActionView(APIView):
    created_status = status.HTTP_200_OK

    def act(self, alert, user, body) -> dict:
        raise NotImplementedError

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def post(self, request, pk):
        alert = visible_alert(request.user, pk)
        if not can_triage(request.user, alert.run.project):
            raise exceptions.PermissionDenied("acting on alerts needs the on-call or rule admin role in this project")
        try:
            result = self.act(alert, request.user, _body(request))
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from None
        alert.refresh_from_db(fields=["state", "verdict", "resolved_at", "last_step", "magnitude"])
        return Response({"alert": alert_detail(alert), **result}, status=self.created_status)


class AcknowledgeView(_AlertActionView):
    """Firing or muted → acknowledged; `change` is null when it was acknowledged already."""

    def act(self, alert, user, body):
        change = triage.acknowledge(alert, user)
        return {"change": change and change_as_dict(change)}


class ResolveView(_AlertActionView):
    """Resolve by hand, with an optional `note`; `change` is null when it was resolved already."""

    def act(self, alert, user, body):
        change = triage.resolve(alert, user, note=body.get("note"))
        return {"change": change and change_as_dict(change)}


class VerdictView(_AlertActionView):
    """{"verdict": "actionable" | "false_alarm", "note": …} (a note is required for a false alarm)."""

    def act(self, alert, user, body):
        change = triage.give_verdict(alert, user, body.get("verdict"), body.get("note"))
        return {"change": change_as_dict(change)}


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


class InboxQuerySerializer(serializers.Serializer):
    state = serializers.ChoiceField(triage.INBOX_STATES, required=False, default="open")
    project = serializers.SlugField(required=False, max_length=64, help_text="project slug")
    rule = serializers.IntegerField(required=False, min_value=1, max_value=triage.MAX_ID, help_text="rule id")
    run = pattern_field(RUN_ID_RE, "run", 128, required=False, help_text="run id")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=InboxPagination.max_limit,
                                     default=InboxPagination.default_limit)
    offset = serializers.IntegerField(required=False, min_value=0, max_value=triage.MAX_ID, default=0)


class InboxView(APIView):
    @extend_schema(parameters=[InboxQuerySerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request):
        """Alerts across the runs the caller may see, newest first: {count, next, previous, results}."""
        query = read_query(request, InboxQuerySerializer)
        alerts = triage.inbox_alerts(request.user, state=query["state"], project=query.get("project"),
                                     rule=query.get("rule"), run=query.get("run"))
        paginator = InboxPagination()
        page = paginator.paginate_queryset(alerts, request, view=self)
        return paginator.get_paginated_response([inbox_item(a) for a in page])
