"""The reviews app's API: reviews and their steps, decisions and the decision log, the chronicle.

Members of a project read; on-call and rule admins (`can_triage`, the helper the pages use too) open reviews,
check steps, decide and write to the log; rule admins set a project's review schedule (on-call a run's own). A viewer or a project
token acting gets 403, anyone outside the project 404. Bad input is a 400 naming the field. The log has no
update or delete: a correction is a new entry (`corrects`).
"""
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, renderers, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.contract import RUN_ID_RE
from ingest.serializers import RUN_ID_PARAMETER, pattern_field, read_query
from opsconsole.permissions import can_edit_rules, can_triage, visible_projects, visible_runs
from opsconsole.request_guard import BoundedJSONParser
from opsconsole.rest import JsonTypesMixin, OwnFormatParameter, streamed_download
from opsconsole.schema import ErrorBodySerializer, errors
from reviews import lifecycle
from reviews.chronicle import chronicle
from reviews.lifecycle import visible_reviews
from reviews.log import entries_for, jsonl_lines
from reviews.postmortem import postmortem, postmortem_markdown
from reviews.models import (
    MAX_EVERY_HOURS, MIN_EVERY_HOURS, MIN_EVERY_STEPS, DecisionKind, LogEntry, Review, ReviewSchedule, ReviewState, ReviewTrigger,
)
from reviews.wire import entry_as_dict, review_as_dict, review_summary

MAX_ID = 2**63 - 1


def _acting(user, project):
    if not can_triage(user, project):
        raise exceptions.PermissionDenied(lifecycle.TRIAGE_DENIED)


def _domain(call, *args, **kwargs):
    """A domain rule's ValidationError as the API's 400 naming the field."""
    try:
        return call(*args, **kwargs)
    except DjangoValidationError as exc:
        raise exceptions.ValidationError(exc.message_dict) from None


# --- reviews and the decision log

class _JsonBodies:
    """Bodies are JSON only: nested fields (links, evidence, next_review) have no form encoding to read."""

    parser_classes = [BoundedJSONParser]


_TEXT = {"max_length": lifecycle.MAX_TEXT}
# Said text: at least one character that is not white space (the schema says so as a pattern). Python counts
# \x1c-\x1f and \x85 as white space where a JSON Schema's \s does not, so the pattern names them too.
_SAID = {**_TEXT, "min_length": 1, "validators": [RegexValidator(r"[^\s\x1c-\x1f\x85]", "must not be blank")]}


class ReviewQuerySerializer(serializers.Serializer):
    run = pattern_field(RUN_ID_RE, "run", 128, required=False, help_text="run id")
    project = serializers.SlugField(required=False, max_length=64, help_text="project slug")
    state = serializers.ChoiceField(ReviewState.values, required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


class ReviewCreateSerializer(JsonTypesMixin, serializers.Serializer):
    run = pattern_field(RUN_ID_RE, "run", 128, help_text="the run to review")
    comparison = pattern_field(RUN_ID_RE, "comparison", 128, required=False, allow_null=True,
                               help_text="the run to compare with (default: the project's reference run)")
    incident = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_ID,
                                        help_text="the incident of this run the review is about (its id)")


class ReviewListView(_JsonBodies, APIView):
    @extend_schema(operation_id="reviews_list", parameters=[ReviewQuerySerializer], responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Reviews of the runs the caller may see, newest first (filter by run, project, state)."""
        query = read_query(request, ReviewQuerySerializer)
        reviews = visible_reviews(request.user)
        if query.get("run"):
            reviews = reviews.filter(run__run_id=query["run"])
        if query.get("project"):
            reviews = reviews.filter(run__project__slug=query["project"])
        if query.get("state"):
            reviews = reviews.filter(state=query["state"])
        return Response({"reviews": [review_summary(r) for r in reviews[: query["limit"]]]})

    @extend_schema(operation_id="reviews_create", request=ReviewCreateSerializer,
                   responses={201: OpenApiTypes.OBJECT, **errors(403, 404)},
                   description="`incident`, when given, is an incident of the run (400 naming `incident` otherwise).")
    def post(self, request):
        """Start a review of a run by hand: steps 1-5 are filled from the stored data before the answer."""
        body = _valid(ReviewCreateSerializer, request)
        run = get_object_or_404(visible_runs(request.user), run_id=body["run"])
        _acting(request.user, run.project)
        comparison = None
        if body.get("comparison"):
            comparison = get_object_or_404(visible_runs(request.user), run_id=body["comparison"])
            if comparison.project_id != run.project_id or comparison.pk == run.pk:
                raise exceptions.ValidationError({"comparison": "another run of the same project"})
        incident = _domain(lifecycle.incident_of, run, body.get("incident"))
        review = lifecycle.open_review(run, ReviewTrigger.MANUAL, by=request.user, comparison=comparison, incident=incident)
        return Response(review_as_dict(review), status=status.HTTP_201_CREATED)


def _valid(serializer_class, request) -> dict:
    if not isinstance(request.data, dict):
        raise exceptions.ValidationError({"": "the body must be a JSON object"})
    body = serializer_class(data=request.data, context={"request": request})
    body.is_valid(raise_exception=True)
    return body.validated_data


def _review(request, pk) -> Review:
    return get_object_or_404(visible_reviews(request.user), pk=pk)


class ReviewDetailView(APIView):
    @extend_schema(operation_id="reviews_retrieve", responses={200: OpenApiTypes.OBJECT, **errors(404)})
    def get(self, request, pk):
        """A review: its six steps as they were shown (state, findings, evidence), who did each and when, its decision."""
        return Response(review_as_dict(_review(request, pk)))


class StepCheckSerializer(JsonTypesMixin, serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, **_TEXT)


class ReviewStepView(_JsonBodies, APIView):
    @extend_schema(operation_id="reviews_check_step", request=StepCheckSerializer,
                   parameters=[OpenApiParameter("number", int, OpenApiParameter.PATH, description="the step, 1 to 5",
                                                enum=[1, 2, 3, 4, 5])],
                   responses={200: OpenApiTypes.OBJECT, **errors(403, 404)},
                   description="Steps 1-5 can be checked while the review is open (400 naming `review` once decided).")
    def post(self, request, pk, number):
        """Record that the caller went through step `number` (1-5), with an optional note."""
        review = _review(request, pk)
        _acting(request.user, review.run.project)
        body = _valid(StepCheckSerializer, request)
        _domain(lifecycle.check_step, review, number, by=request.user, note=body.get("note", ""))
        return Response(review_as_dict(review))


class ComparisonSerializer(JsonTypesMixin, serializers.Serializer):
    run = pattern_field(RUN_ID_RE, "run", 128, allow_null=True, help_text="another run of the project; null for none")


class ReviewComparisonView(_JsonBodies, APIView):
    @extend_schema(operation_id="reviews_compare", request=ComparisonSerializer,
                   responses={200: OpenApiTypes.OBJECT, **errors(403, 404)},
                   description="Only while the review is open (400 naming `review` once decided).")
    def post(self, request, pk):
        """Compare with another run: steps 1-5 are filled again against it."""
        review = _review(request, pk)
        _acting(request.user, review.run.project)
        body = _valid(ComparisonSerializer, request)
        other = get_object_or_404(visible_runs(request.user), run_id=body["run"]) if body.get("run") else None
        _domain(lifecycle.choose_comparison, review, other, by=request.user)
        return Response(review_as_dict(_review(request, pk)))


class EvidenceSerializer(serializers.Serializer):
    label = serializers.CharField(max_length=300)
    href = serializers.CharField(max_length=1000, help_text="a path in this console, starting with /")


class NextReviewSerializer(serializers.Serializer):
    step = serializers.IntegerField(required=False, min_value=0, max_value=2**53 - 1, help_text="after the run's newest step")
    at = serializers.DateTimeField(required=False, help_text="a time in the future")
    rule = serializers.SlugField(required=False, max_length=100, help_text="the next alert of this rule of the project")


class LinksSerializer(serializers.Serializer):
    alerts = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=MAX_ID), required=False, max_length=200)
    incidents = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=MAX_ID), required=False, max_length=200)
    reviews = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=MAX_ID), required=False, max_length=200)
    steps = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=2**53 - 1), required=False, max_length=200)
    runs = serializers.ListField(child=pattern_field(RUN_ID_RE, "run", 128), required=False, max_length=200)
    evidence = EvidenceSerializer(many=True, required=False, max_length=200)


class _EntryFields(JsonTypesMixin, serializers.Serializer):
    observation = serializers.CharField(**_SAID)
    explanations = serializers.ListField(child=serializers.CharField(**_SAID), min_length=1, max_length=lifecycle.MAX_EXPLANATIONS,
                                         help_text="one or more competing explanations")
    action = serializers.CharField(required=False, allow_blank=True, **_TEXT)
    owner = serializers.CharField(required=False, allow_blank=True, max_length=300,
                                  help_text="who owns what happens next (default: the project's owner)")
    expected_next = serializers.CharField(required=False, allow_blank=True, help_text="the evidence expected next", **_TEXT)
    links = LinksSerializer(required=False)
    next_review = NextReviewSerializer(required=False, allow_null=True)


class DecisionSerializer(_EntryFields):
    decision = serializers.ChoiceField(DecisionKind.values)
    evidence = EvidenceSerializer(many=True, required=False, max_length=200, help_text="picked from the steps' evidence")
    artifacts_preserved = serializers.BooleanField(required=False, default=False,
                                                   help_text="terminate: the reviewer confirms the artifacts are preserved")
    accept_rewind = serializers.BooleanField(required=False, default=False,
                                             help_text="intervene on an incident: record the proposed rewind")
    run_finished_ok = serializers.BooleanField(required=False, default=False,
                                               help_text="intervene or terminate on a finished run: the reviewer means it")


def _entry_fields(body) -> dict:
    fields = {key: body[key] for key in ("observation", "explanations", "action", "owner", "expected_next") if key in body}
    links = body.get("links")
    fields["links"] = {k: [dict(e) for e in v] if k == "evidence" else v for k, v in links.items()} if links else None
    trigger = body.get("next_review")
    fields["next_review"] = {k: v.isoformat() if k == "at" else v for k, v in trigger.items()} if trigger else None
    return fields


class ReviewDecisionView(_JsonBodies, APIView):
    @extend_schema(operation_id="reviews_decide", request=DecisionSerializer,
                   responses={201: OpenApiTypes.OBJECT, **errors(403, 404)},
                   description="Decided once (400 naming `review` after that). Terminate needs artifacts_preserved=true; "
                               "intervene or terminate on a finished run needs run_finished_ok=true; "
                               "intervene needs the action; next_review.step after the run's newest step, next_review.at "
                               "in the future, next_review.rule a rule of the project (400 naming the field otherwise).")
    def post(self, request, pk):
        """Step 6: continue, intervene or terminate, with the evidence and the next-review trigger; writes one log entry."""
        review = _review(request, pk)
        _acting(request.user, review.run.project)
        body = _valid(DecisionSerializer, request)
        entry = _domain(
            lifecycle.decide, review, by=request.user, decision=body["decision"],
            evidence=[dict(e) for e in body.get("evidence", [])], artifacts_preserved=body["artifacts_preserved"],
            accept_rewind=body["accept_rewind"], run_finished_ok=body["run_finished_ok"], **_entry_fields(body),
        )
        return Response({"review": review_as_dict(_review(request, pk)), "entry": entry_as_dict(entry)}, status=status.HTTP_201_CREATED)


class ScheduleQuerySerializer(serializers.Serializer):
    project = serializers.SlugField(required=False, max_length=64, help_text="project slug")


class ScheduleTargetSerializer(serializers.Serializer):
    project = serializers.SlugField(max_length=64, help_text="project slug")
    run = pattern_field(RUN_ID_RE, "run", 128, required=False, allow_null=True, help_text="a run's own schedule; absent for the project's")


class ScheduleFiguresSerializer(JsonTypesMixin, serializers.Serializer):
    every_steps = serializers.IntegerField(required=False, allow_null=True, min_value=MIN_EVERY_STEPS, max_value=2**53 - 1,
                                           help_text=f"at least {MIN_EVERY_STEPS}; null for none")
    every_hours = serializers.FloatField(required=False, allow_null=True, min_value=MIN_EVERY_HOURS, max_value=MAX_EVERY_HOURS,
                                         help_text=f"at least {MIN_EVERY_HOURS:g}; null for none")


class ScheduleSerializer(ScheduleFiguresSerializer, ScheduleTargetSerializer):
    def validate(self, data):
        # A body naming neither figure is a mistake (a misspelt key), never a removal: that takes an explicit null.
        if "every_steps" not in data and "every_hours" not in data:
            raise serializers.ValidationError({"every_steps": "give every_steps, every_hours or both (null for both removes the schedule)"})
        return data


def schedule_as_dict(schedule) -> dict:
    return {"project": schedule.project.slug, "run": schedule.run.run_id if schedule.run_id else None,
            "every_steps": schedule.every_steps, "every_hours": schedule.every_hours, "updated_at": schedule.updated_at}


_REMOVED = OpenApiResponse(description="both figures null: the schedule is removed (a run's own: the project's applies again)")


class ReviewScheduleView(_JsonBodies, APIView):
    @extend_schema(operation_id="review_schedules_list", parameters=[ScheduleQuerySerializer], responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Review schedules: a project's (every run) and runs' own, which replace it."""
        query = read_query(request, ScheduleQuerySerializer)
        schedules = ReviewSchedule.objects.filter(project__in=visible_projects(request.user)).select_related("project", "run")
        if query.get("project"):
            schedules = schedules.filter(project__slug=query["project"])
        return Response({"schedules": [schedule_as_dict(s) for s in schedules.order_by("project__slug", "id")]})

    @extend_schema(operation_id="review_schedules_set", request=ScheduleSerializer,
                   responses={200: OpenApiTypes.OBJECT, 204: _REMOVED, **errors(403, 404)},
                   description=f"every_steps (at least {MIN_EVERY_STEPS}), every_hours (at least {MIN_EVERY_HOURS:g}) or both, "
                               "replacing the schedule (a figure absent is none); both null removes it (204). 400 naming "
                               "every_steps when neither is named, or the field below its floor.")
    def put(self, request):
        """Set a project's schedule (rule admins) or a run's own (on-call and rule admins): every N steps and/or H hours."""
        body = _valid(ScheduleSerializer, request)
        project, run = self._target(request, body)
        return self._saved(_domain(lifecycle.set_schedule, project, run, every_steps=body.get("every_steps"),
                                   every_hours=body.get("every_hours"), by=request.user))

    @extend_schema(operation_id="review_schedules_partial_update", parameters=[ScheduleTargetSerializer],
                   request=ScheduleFiguresSerializer, responses={200: OpenApiTypes.OBJECT, 204: _REMOVED, **errors(403, 404)},
                   description="The schedule named by the query (404 when there is none: PUT sets one). Changes the figures "
                               "the body names (null: none), keeping the other; both none removes the schedule (204).")
    def patch(self, request):
        """Change one figure of a project's or a run's own schedule."""
        project, run = self._target(request, read_query(request, ScheduleTargetSerializer))
        body = _valid(ScheduleFiguresSerializer, request)
        try:
            return self._saved(_domain(lifecycle.change_schedule, project, run, body, by=request.user))
        except ReviewSchedule.DoesNotExist:
            raise exceptions.NotFound("no such review schedule") from None

    @extend_schema(operation_id="review_schedules_remove", parameters=[ScheduleTargetSerializer],
                   responses={204: None, **errors(403, 404)},
                   description="404 when there is no such schedule. A run's own removed, the project's applies to it again.")
    def delete(self, request):
        """Remove a project's schedule (rule admins) or a run's own (on-call and rule admins)."""
        query = read_query(request, ScheduleTargetSerializer)
        project, run = self._target(request, query)
        if not lifecycle.remove_schedule(project, run):
            raise exceptions.NotFound("no such review schedule")
        return Response(status=status.HTTP_204_NO_CONTENT)

    @staticmethod
    def _target(request, body):
        """The schedule's project and run (None: the project's), once the caller may change it."""
        project = get_object_or_404(visible_projects(request.user), slug=body["project"])
        run = None
        if body.get("run"):
            run = get_object_or_404(visible_runs(request.user).filter(project=project), run_id=body["run"])
            _acting(request.user, project)
        elif not can_edit_rules(request.user, project):
            raise exceptions.PermissionDenied("a project's review schedule is set by its rule admins")
        return project, run

    @staticmethod
    def _saved(schedule):
        return Response(schedule_as_dict(schedule)) if schedule is not None else Response(status=status.HTTP_204_NO_CONTENT)


class LogQuerySerializer(serializers.Serializer):
    run = pattern_field(RUN_ID_RE, "run", 128, required=False, help_text="run id")
    project = serializers.SlugField(required=False, max_length=64, help_text="project slug")
    decision = serializers.ChoiceField([*DecisionKind.values, "none"], required=False,
                                       help_text="none: entries written on a run, outside a review")
    owner = serializers.CharField(required=False, max_length=300, trim_whitespace=False, help_text="part of the owner's name")
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=200)
    format = serializers.ChoiceField(["json", "jsonl"], required=False, default="json",
                                     help_text="jsonl: every matching entry, one JSON object per line, streamed")


class LogEntryCreateSerializer(_EntryFields):
    run = pattern_field(RUN_ID_RE, "run", 128)
    corrects = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="the id of the entry this one corrects")
    decision = serializers.ChoiceField(DecisionKind.values, required=False, allow_blank=True,
                                       help_text="a correction only: the corrected decision, which supersedes the original's")
    artifacts_preserved = serializers.BooleanField(required=False, default=False,
                                                   help_text="a corrected terminate: the artifacts are preserved")
    run_finished_ok = serializers.BooleanField(required=False, default=False,
                                               help_text="a corrected intervene or terminate on a finished run: meant")


class LogEntryListView(OwnFormatParameter, _JsonBodies, APIView):

    @extend_schema(operation_id="decisions_list", parameters=[LogQuerySerializer], responses={
        (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT, description="{\"entries\": [...]}, oldest first"),
        (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="with format=jsonl: every matching "
                                                       "entry, one JSON object per line, streamed"),
        (400, "application/json"): OpenApiResponse(ErrorBodySerializer, description=errors(400)[400].description),
    })
    def get(self, request):
        """The decision log of the runs the caller may see, filtered by run, project, decision, owner and time."""
        query = read_query(request, LogQuerySerializer)
        entries = entries_for(request.user, **{k: query.get(k) for k in ("run", "project", "decision", "owner", "since", "until")})
        if query["format"] == "jsonl":
            return streamed_download(request, jsonl_lines(entries), "application/x-ndjson", "decision-log.jsonl")
        return Response({"entries": [entry_as_dict(e) for e in entries[: query["limit"]]]})

    @extend_schema(operation_id="decisions_create", request=LogEntryCreateSerializer,
                   responses={201: OpenApiTypes.OBJECT, **errors(403, 404)},
                   description="`corrects` names an entry of the same run; a correction may carry the corrected "
                               "`decision` (400 naming `decision` on an entry that corrects nothing), under the rules of a "
                               "decision (terminate: artifacts_preserved; a finished run: run_finished_ok); links name alerts, incidents, reviews and runs of "
                               "the run's project; next_review as for a decision (400 naming the field otherwise).")
    def post(self, request):
        """Append an entry to a run's decision log (observation, explanations, action, owner, evidence expected next, links)."""
        body = _valid(LogEntryCreateSerializer, request)
        run = get_object_or_404(visible_runs(request.user), run_id=body["run"])
        _acting(request.user, run.project)
        corrects = None
        if body.get("corrects"):
            corrects = LogEntry.objects.filter(pk=body["corrects"], run__project__in=visible_projects(request.user)).first()
            if corrects is None:
                raise exceptions.ValidationError({"corrects": "no such entry in the log"})
        entry = _domain(lifecycle.write_entry, run, by=request.user, corrects=corrects, decision=body.get("decision", ""),
                        artifacts_preserved=body["artifacts_preserved"], run_finished_ok=body["run_finished_ok"],
                        **_entry_fields(body))
        return Response(entry_as_dict(entry), status=status.HTTP_201_CREATED)


class LogEntryDetailView(APIView):
    @extend_schema(operation_id="decisions_retrieve", responses={200: OpenApiTypes.OBJECT, **errors(404)})
    def get(self, request, pk):
        """One entry, with the entries that correct it."""
        entry = get_object_or_404(
            LogEntry.objects.filter(project__in=visible_projects(request.user)).select_related("project", "run", "author"), pk=pk
        )
        return Response(entry_as_dict(entry))


# --- the chronicle and the postmortem

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
