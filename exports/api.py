"""The exports app's API: a run's or a project's alerts, incidents, events and decisions as JSON Lines, streamed.

Members of the project and its tokens read (any role); anyone else gets 404, as for the run's other reads.
Exports streaming at once are limited per project and per token (exports/limits.py): beyond, 429.
"""
from django.core.validators import RegexValidator
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from exports import limits
from exports.jsonl import TYPES, TYPES_PATTERN, TYPES_WORDS, export_lines
from ingest.serializers import RUN_ID_PARAMETER, read_query
from opsconsole.permissions import visible_projects, visible_runs
from opsconsole.rest import OwnFormatParameter, streamed_download
from opsconsole.schema import ErrorBodySerializer, errors


class ExportQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(["jsonl"], required=False, default="jsonl",
                                     help_text="jsonl: one JSON object per line, each with its `type`")
    types = serializers.CharField(required=False, max_length=100, trim_whitespace=False,
                                  validators=[RegexValidator(rf"\A{TYPES_PATTERN}\Z", TYPES_WORDS)],
                                  error_messages={"blank": f"must not be empty: {TYPES_WORDS}"},
                                  help_text=f"which records, comma-separated (default: all of {', '.join(TYPES)})")
    since = serializers.DateTimeField(required=False, help_text="only records that began at or after this time "
                                      "(alerts fired, incidents opened, events happened, decisions written)")


SLUG_PARAMETER = OpenApiParameter("slug", str, OpenApiParameter.PATH, pattern=r"^[-a-zA-Z0-9_]{1,64}$", description="project slug",
                                  examples=[OpenApiExample("the README's project", value="pretrain")])
RESPONSES = {
    (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="alerts, then incidents, events and "
                                                   "decisions, each oldest first: one JSON object per line, streamed"),
    **{(code, "application/json"): OpenApiResponse(ErrorBodySerializer, description=errors(code)[code].description)
       for code in (400, 404)},
}


class _ExportView(OwnFormatParameter, APIView):
    def export(self, request, scope: dict, project, name: str):
        query = read_query(request, ExportQuerySerializer)
        types = tuple(query["types"].split(",")) if "types" in query else TYPES
        slot = limits.take(request, project)
        try:
            response = streamed_download(request, export_lines(scope, types, query.get("since")), "application/x-ndjson", f"{name}.jsonl")
        except BaseException:
            slot.give_back()
            raise
        return limits.held_while_streaming(response, slot)


class RunExportView(_ExportView):
    @extend_schema(operation_id="runs_export", parameters=[RUN_ID_PARAMETER, ExportQuerySerializer], responses=RESPONSES)
    def get(self, request, run_id):
        """The run's alerts, incidents, events and decisions as JSON Lines (a download)."""
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        return self.export(request, {"run": run}, run.project, f"run-{run.run_id}")


class ProjectExportView(_ExportView):
    @extend_schema(operation_id="projects_export", parameters=[SLUG_PARAMETER, ExportQuerySerializer], responses=RESPONSES)
    def get(self, request, slug):
        """The alerts, incidents, events and decisions of every run of the project as JSON Lines (a download)."""
        project = get_object_or_404(visible_projects(request.user), slug=slug)
        return self.export(request, {"run__project": project}, project, f"project-{project.slug}")
