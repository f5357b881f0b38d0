from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers

from alerts import faults
from alerts.models import Rule
from alerts.rules import EDIT_DENIED, name_conflict, save_rule
from ingest.models import Project
from opsconsole.rest import JsonTypesMixin
from opsconsole.permissions import can_edit_rules, visible_projects


class VisibleProjectField(serializers.SlugRelatedField):
    """A project the caller can see: any other slug "does not exist", so an outsider learns nothing of it."""

    def get_queryset(self):
        return visible_projects(self.context["request"].user)


class RuleHealthSerializer(serializers.Serializer):
    state = serializers.ChoiceField(["ok", "broken", "recovered"], help_text="broken: its latest evaluation failed")
    failures = serializers.IntegerField(help_text="batches the rule could not judge, ever")
    last_error = serializers.CharField(allow_null=True)
    last_failed_at = serializers.DateTimeField(allow_null=True)
    recovered_at = serializers.DateTimeField(allow_null=True)


class RuleSerializer(JsonTypesMixin, serializers.ModelSerializer):
    project = VisibleProjectField(slug_field="slug", queryset=Project.objects.all())
    # Declared explicitly so a missing or empty field is a 400 naming it, never a default.
    owner = serializers.CharField(allow_blank=True)
    scope = serializers.JSONField()
    persistence = serializers.JSONField()
    diagnostic_url = serializers.CharField(allow_blank=True)
    permitted_response = serializers.CharField(allow_blank=True)
    health = serializers.SerializerMethodField()

    class Meta:
        model = Rule
        fields = [
            "id", "project", "name", "kind", "description", "owner", "scope", "persistence",
            "diagnostic_url", "permitted_response", "params", "enabled", "health", "created_at", "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]
        # The name's uniqueness is checked in validate(), once the caller is known to edit the project's rules.
        validators = []

    @extend_schema_field(RuleHealthSerializer)
    def get_health(self, rule):
        return RuleHealthSerializer(faults.health(rule)).data

    def validate_project(self, project):
        # Before any other check: whether a name is taken is only for those who may edit the rules.
        if not can_edit_rules(self.context["request"].user, project):
            raise exceptions.PermissionDenied(EDIT_DENIED)
        return project

    def validate(self, attrs):
        project = attrs.get("project", getattr(self.instance, "project", None))
        name = attrs.get("name", getattr(self.instance, "name", None))
        conflict = name_conflict(project, name, self.instance)
        if conflict:
            raise serializers.ValidationError({"name": conflict})
        return attrs

    def _save(self, rule):
        try:
            return save_rule(rule, user=self.context["request"].user, source="api")
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None

    def create(self, validated_data):
        return self._save(Rule(**validated_data))

    def update(self, instance, validated_data):
        for key, value in validated_data.items():
            setattr(instance, key, value)
        return self._save(instance)
