from rest_framework import exceptions, viewsets

from alerts.models import Rule
from alerts.rules import delete_rule
from alerts.serializers import RuleSerializer
from opsconsole.permissions import can_edit_rules, visible_projects


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
        delete_rule(instance, user=self.request.user, source="api")
