from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts.models import Alert, AlertState
from ingest.serializers import RunQuerySerializer, read_query
from ingest.views import wire_value
from opsconsole.permissions import visible_runs
from opsconsole.schema import errors


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


def alert_as_dict(alert: Alert) -> dict:
    rule = alert.rule
    return {
        "id": alert.pk,
        "run": alert.run.run_id,
        "rule": {
            "id": rule.pk,
            "name": rule.name,
            "owner": rule.owner,
            "permitted_response": rule.permitted_response,
            "diagnostic_url": rule.diagnostic_url,
        },
        "component": alert.component or None,
        "metric": alert.metric or None,
        "condition": alert.condition or None,
        "step": alert.first_step,
        "last_step": alert.last_step,
        "fired_step": alert.fired_step,
        "magnitude": None if alert.magnitude is None else wire_value(alert.magnitude),
        "magnitude_unit": alert.magnitude_unit,
        "phase": alert.phase or None,
        "state": alert.state,
        "verdict": alert.verdict,
        "fired_at": alert.fired_at,
        "resolved_at": alert.resolved_at,
    }


class AlertListView(APIView):
    @extend_schema(operation_id="alerts_list", parameters=[RunQuerySerializer], responses={200: AlertSerializer(many=True), **errors(404)})
    def get(self, request):
        """The alerts of a run, oldest first (contract v1)."""
        run_id = read_query(request, RunQuerySerializer)["run"]
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        alerts = Alert.objects.filter(run=run).select_related("rule", "run").order_by("fired_at", "id")
        return Response([alert_as_dict(a) for a in alerts])
