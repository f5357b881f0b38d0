"""The report's query (project, owner, period), read the same way by the API and the pages."""

from django.shortcuts import get_object_or_404
from django.utils import timezone
from rest_framework import serializers

from audit.report import Period, days_before
from opsconsole.permissions import visible_projects

DEFAULT_DAYS = 30  # the period when `since` is not given: the 30 days before `until`


class ReportQuerySerializer(serializers.Serializer):
    project = serializers.SlugField(max_length=64, help_text="project slug")
    owner = serializers.CharField(required=False, max_length=300, help_text="the rules' owner text, exactly")
    since = serializers.DateTimeField(required=False, help_text=f"start (inclusive); default {DEFAULT_DAYS} days before until")
    until = serializers.DateTimeField(required=False, help_text="end (exclusive); default now")
    format = serializers.ChoiceField(["json", "csv"], required=False, default="json")

    def validate(self, data):
        # `since` at or after `until` is an empty period (every count 0, every rate null), not an error: each
        # bound is valid on its own, and the schema cannot say how they relate.
        until = data.get("until") or timezone.now()
        data["since"], data["until"] = data.get("since") or days_before(until, DEFAULT_DAYS), until
        return data


def read_report_query(user, params: dict):
    """(project, period, owner, format) from query parameters; a ValidationError naming the field, a 404 for a
    project the user may not see."""
    query = ReportQuerySerializer(data=params)
    query.is_valid(raise_exception=True)
    data = query.validated_data
    project = get_object_or_404(visible_projects(user), slug=data["project"])
    return project, Period(data["since"], data["until"]), data.get("owner") or None, data["format"]
