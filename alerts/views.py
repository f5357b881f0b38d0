from django.db.models import ProtectedError
from rest_framework import exceptions, permissions, status, viewsets
from rest_framework.settings import api_settings

from alerts import faults
from alerts.models import Rule
from alerts.rules import EDIT_DENIED, delete_rule
from alerts.serializers import RuleSerializer
from opsconsole.permissions import can_edit_rules, visible_projects


class RuleInUse(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "this rule has alerts; disable it instead (PATCH enabled=false) to keep their history"
    default_code = "rule_in_use"


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
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, EditsNeedRuleAdmin]

    def get_queryset(self):
        rules = Rule.objects.filter(project__in=visible_projects(self.request.user)).select_related("project")
        if self.request.query_params.get("project"):
            rules = rules.filter(project__slug=self.request.query_params["project"])
        return faults.with_health(rules)

    def perform_destroy(self, instance):
        try:
            delete_rule(instance, user=self.request.user, source="api")
        except ProtectedError:
            # Its alerts are history (verdicts, mutes, audit): a rule that fired is disabled, not deleted.
            raise RuleInUse() from None
