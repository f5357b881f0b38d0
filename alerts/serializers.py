from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from alerts.models import Rule
from alerts.rules import save_rule
from ingest.models import Project


class RuleSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", queryset=Project.objects.all())
    # Declared explicitly so a missing or empty field is a 400 naming it, never a default.
    owner = serializers.CharField(allow_blank=True)
    scope = serializers.JSONField()
    persistence = serializers.JSONField()
    diagnostic_url = serializers.CharField(allow_blank=True)
    permitted_response = serializers.CharField(allow_blank=True)

    class Meta:
        model = Rule
        fields = [
            "id", "project", "name", "kind", "description", "owner", "scope", "persistence",
            "diagnostic_url", "permitted_response", "params", "enabled", "created_at", "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]

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
