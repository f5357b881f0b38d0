"""The reviews app's API: reviews and their steps, decisions and the decision log, the chronicle."""
from rest_framework.views import APIView


# --- reviews and the decision log

class ReviewListView(APIView):
    pass


class ReviewDetailView(APIView):
    pass


class ReviewStepView(APIView):
    pass


class ReviewComparisonView(APIView):
    pass


class ReviewDecisionView(APIView):
    pass


class ReviewScheduleView(APIView):
    pass


class LogEntryListView(APIView):
    pass


class LogEntryDetailView(APIView):
    pass


# --- the chronicle and the postmortem

from django.http import HttpResponse  # noqa: E402
from django.shortcuts import get_object_or_404  # noqa: E402
from drf_spectacular.types import OpenApiTypes  # noqa: E402
from drf_spectacular.utils import OpenApiResponse, extend_schema  # noqa: E402
from rest_framework import renderers, serializers  # noqa: E402
from rest_framework.response import Response  # noqa: E402

from ingest.serializers import RUN_ID_PARAMETER  # noqa: E402
from opsconsole.permissions import visible_runs  # noqa: E402
from opsconsole.schema import ErrorBodySerializer, errors  # noqa: E402
from reviews.chronicle import chronicle  # noqa: E402
from reviews.postmortem import postmortem, postmortem_markdown  # noqa: E402


class ChronicleEntrySerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="wall time of the entry")
    step = serializers.IntegerField(allow_null=True, help_text="the run's step it concerns, when it has one")
    kind = serializers.CharField(help_text="run, identity, attempt, restart, rewind, alert.<change>, incident.opened, "
                                           "incident.resolved, mute, mute.ended, review.<activity>, decision")
    title = serializers.CharField()
    detail = serializers.DictField(help_text="the entry's own fields (an attempt's cause and evidence, an alert, …)")
    link = serializers.CharField(allow_null=True, help_text="where the console shows it")


class MarkdownRenderer(renderers.BaseRenderer):
    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode("utf-8") if isinstance(data, str) else b""


class PostmortemMarkdownView(APIView):
    """A download, whatever the Accept header says: the Markdown, or an error in the API's JSON error body."""

    renderer_classes = [MarkdownRenderer]  # one: no `format` parameter to document; errors switch to JSON below

    def perform_content_negotiation(self, request, force=False):
        return (MarkdownRenderer(), MarkdownRenderer.media_type)

    def finalize_response(self, request, response, *args, **kwargs):
        if isinstance(response, Response) and response.status_code >= 400:
            request.accepted_renderer, request.accepted_media_type = renderers.JSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(operation_id="runs_postmortem_md", parameters=[RUN_ID_PARAMETER], responses={
        (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR, description="The postmortem as Markdown (an attachment): "
                                                "Summary, Interruptions, Incidents, Decisions, Chronicle."),
        (404, "application/json"): OpenApiResponse(ErrorBodySerializer, description=errors(404)[404].description),
    })
    def get(self, request, run_id):
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        response = HttpResponse(postmortem_markdown(run), content_type="text/markdown; charset=utf-8")
        filename = "postmortem-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in run.run_id) + ".md"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response


class PostmortemJsonView(APIView):
    @extend_schema(operation_id="runs_postmortem_json", parameters=[RUN_ID_PARAMETER], responses={
        200: OpenApiResponse(OpenApiTypes.OBJECT, description="run, generated_at, rules, summary, attempts (each with its "
                             "cause and evidence, steps computed and kept, seconds), effective_time, incidents, decisions, "
                             "reviews, chronicle"),
        **errors(404)})
    def get(self, request, run_id):
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        return Response(postmortem(run))


class ChronicleView(APIView):
    @extend_schema(operation_id="runs_chronicle", parameters=[RUN_ID_PARAMETER],
                   responses={200: ChronicleEntrySerializer(many=True), **errors(404)})
    def get(self, request, run_id):
        """What happened to the run, in time order (ties by step): identity, attempts with causes, alerts, mutes, reviews, decisions."""
        run = get_object_or_404(visible_runs(request.user), run_id=run_id)
        return Response(chronicle(run))
