"""Read-side shapes of the v1 API (also what the OpenAPI schema documents), and the query parameters it takes.

A query serializer is both the parameters' documentation (drf-spectacular reads
its fields: types, ranges, enums, patterns) and their validation (`read_query`),
so the schema cannot claim a bound the view does not enforce.
"""
from django.core.validators import RegexValidator
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from ingest.contract import COMPONENT_RE, CONDITIONS, METRIC_RE, MAX_STEP, RUN_ID_RE
from ingest.models import Attempt, IdentityChange, Phase, Run
from ingest.phases import phase_spans


def pattern_field(regex, what, limit, **kwargs):
    """A string matching the contract's pattern as a whole (documented as the ECMA pattern ^…$)."""
    validator = RegexValidator(rf"\A(?:{regex.pattern})\Z", f"{what} must match {regex.pattern}")
    return serializers.CharField(max_length=limit, trim_whitespace=False, validators=[validator], **kwargs)


# PostgreSQL cannot store it: documented as a pattern, and refused wherever text is taken.
NO_NUL = RegexValidator(r"\A[^\x00]*\Z", "must not contain the NUL character")


def step_field(**kwargs):
    return serializers.IntegerField(required=False, min_value=0, max_value=MAX_STEP, **kwargs)


# Run ids may hold "/": the routes take the rest of the path, the schema the contract's pattern.
RUN_ID_PARAMETER = OpenApiParameter("run_id", str, OpenApiParameter.PATH, pattern=f"^{RUN_ID_RE.pattern}$",
                                    description="run id")


def read_query(request, serializer_class) -> dict:
    """The request's query parameters through `serializer_class`: a 400 naming each bad one.

    Read as a plain mapping, not as a form: an empty `?state=` is a value to check, not a parameter left out.
    """
    query = serializer_class(data=request.query_params.dict())
    query.is_valid(raise_exception=True)
    return query.validated_data


class SeriesQuerySerializer(serializers.Serializer):
    metric = pattern_field(METRIC_RE, "metric", 128, help_text="the series' metric")
    component = pattern_field(COMPONENT_RE, "component", 256, required=False, allow_blank=True, default="",
                              help_text="the series' component; absent or empty for the run-level series")
    start = step_field(help_text="first step (inclusive)")
    end = step_field(help_text="last step (inclusive)")


class PointsQuerySerializer(SeriesQuerySerializer):
    attempt = serializers.ChoiceField(["all"], required=False, help_text="all: every attempt's points, not only the newest")


class EventsQuerySerializer(serializers.Serializer):
    start = step_field(help_text="first step (inclusive)")
    end = step_field(help_text="last step (inclusive)")
    condition = serializers.ChoiceField(CONDITIONS, required=False)


class RunQuerySerializer(serializers.Serializer):
    run = pattern_field(RUN_ID_RE, "run", 128, help_text="run id")


class PhaseSerializer(serializers.ModelSerializer):
    class Meta:
        model = Phase
        fields = ["step", "phase", "kind", "time", "attempt"]


class AttemptSerializer(serializers.ModelSerializer):
    rewind = serializers.SerializerMethodField()

    class Meta:
        model = Attempt
        fields = ["number", "reason", "start_step", "previous_max_step", "started_at", "rewind"]

    def get_rewind(self, attempt) -> dict | None:
        if not attempt.is_rewind:
            return None
        return {"from_step": attempt.previous_max_step, "to_step": attempt.start_step}


class IdentityChangeSerializer(serializers.ModelSerializer):
    class Meta:
        model = IdentityChange
        fields = ["field", "old", "new", "step", "changed_at"]


class RunSummarySerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="run_id")
    project = serializers.CharField(source="project.slug")

    class Meta:
        model = Run
        fields = ["id", "project", "name", "status", "last_step", "max_step", "attempt", "tags", "last_seen_at", "created_at"]


class RunDetailSerializer(RunSummarySerializer):
    phases = PhaseSerializer(many=True)
    phase_spans = serializers.SerializerMethodField()
    attempts = AttemptSerializer(many=True)
    identity_changes = IdentityChangeSerializer(many=True)
    series = serializers.SerializerMethodField()

    class Meta(RunSummarySerializer.Meta):
        fields = RunSummarySerializer.Meta.fields + [
            "code_rev",
            "data_snapshot",
            "config",
            "budget",
            "phases",
            "phase_spans",
            "attempts",
            "identity_changes",
            "series",
        ]

    def get_phase_spans(self, run) -> list[dict]:
        """The phase in effect over each stretch of steps, ties resolved as the contract says; a phase that lost a tie at its step is kept as a span of that one step (both held there)."""
        return [{"start": s.start, "end": s.end, "phase": s.phase, "kind": s.kind} for s in phase_spans(run)]

    def get_series(self, run) -> list[dict]:
        return [
            {"metric": s.metric, "component": s.component or None, "layer": s.layer, "last_step": s.max_step}
            for s in run.series.order_by("layer", "metric", "component")
        ]


class _AcceptedSerializer(serializers.Serializer):
    points = serializers.IntegerField(min_value=0)
    events = serializers.IntegerField(min_value=0)
    phases = serializers.IntegerField(min_value=0)


class _ActionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(["stop", "rewind"])
    alert = serializers.IntegerField()
    rule = serializers.CharField()


class IngestResponseSerializer(serializers.Serializer):
    run = serializers.CharField()
    accepted = _AcceptedSerializer()
    duplicate = serializers.BooleanField(help_text="true when this batch_id was stored before (nothing stored again)")
    actions = _ActionSerializer(many=True, help_text="open stop/rewind directives of the run (always [] in read-only projects)")


class _PointSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    value = serializers.JSONField(help_text='a number, or "NaN", "Infinity", "-Infinity"')
    attempt = serializers.IntegerField(required=False, help_text="with attempt=all")


class PointsResponseSerializer(serializers.Serializer):
    run = serializers.CharField()
    metric = serializers.CharField()
    component = serializers.CharField(allow_null=True)
    points = _PointSerializer(many=True)


class _EventSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    component = serializers.CharField()
    condition = serializers.CharField()
    magnitude = serializers.JSONField(help_text='a number, or "NaN", "Infinity", "-Infinity"')
    time = serializers.FloatField(allow_null=True)
    detail = serializers.JSONField(allow_null=True)
    attempt = serializers.IntegerField()


class EventsResponseSerializer(serializers.Serializer):
    run = serializers.CharField()
    events = _EventSerializer(many=True)
