from django.db.models import ProtectedError
from rest_framework import exceptions, status, viewsets

from alerts.models import Rule
from alerts.rules import delete_rule
from alerts.serializers import RuleSerializer
from opsconsole.permissions import can_edit_rules, visible_projects


class RuleInUse(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "this rule has alerts; disable it instead (PATCH enabled=false) to keep their history"
    default_code = "rule_in_use"


class RuleViewSet(viewsets.ModelViewSet):
    """Alert rules: members read them; rule admins of the rule's project create, edit and delete."""

    serializer_class = RuleSerializer

    def get_queryset(self):
        rules = Rule.objects.filter(project__in=visible_projects(self.request.user)).select_related("project")
        if self.request.query_params.get("project"):
            rules = rules.filter(project__slug=self.request.query_params["project"])
        return rules

    def _require_rule_admin(self, project):
        if not can_edit_rules(self.request.user, project):
            raise exceptions.PermissionDenied("editing rules needs the rule admin role in this project")

    def perform_create(self, serializer):
        self._require_rule_admin(serializer.validated_data["project"])
        serializer.save()

    def perform_update(self, serializer):
        self._require_rule_admin(serializer.instance.project)
        if "project" in serializer.validated_data:
            self._require_rule_admin(serializer.validated_data["project"])
        serializer.save()

    def perform_destroy(self, instance):
        self._require_rule_admin(instance.project)
        try:
            delete_rule(instance, user=self.request.user, source="api")
        except ProtectedError:
            # Its alerts are history (verdicts, mutes, audit): a rule that fired is disabled, not deleted.
            raise RuleInUse() from None
