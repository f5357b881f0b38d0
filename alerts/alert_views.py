from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts.models import Alert
from ingest.serializers import RunQuerySerializer, read_query
from ingest.views import wire_value
from opsconsole.permissions import visible_runs


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
    @extend_schema(parameters=[RunQuerySerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request):
        """The alerts of a run, oldest first (contract v1)."""
        run_id = read_query(request, RunQuerySerializer)["run"]
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        alerts = Alert.objects.filter(run=run).select_related("rule", "run").order_by("fired_at", "id")
        return Response([alert_as_dict(a) for a in alerts])
