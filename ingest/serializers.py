"""Read-side shapes of the v1 API (also what the OpenAPI schema documents)."""
from rest_framework import serializers

from ingest.models import Attempt, IdentityChange, Phase, Run
from ingest.phases import phase_spans


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
        """The phase in effect over each stretch of steps, ties resolved as the contract says."""
        return [{"start": s.start, "end": s.end, "phase": s.phase, "kind": s.kind} for s in phase_spans(run)]

    def get_series(self, run) -> list[dict]:
        return [
            {"metric": s.metric, "component": s.component or None, "layer": s.layer, "last_step": s.max_step}
            for s in run.series.order_by("layer", "metric", "component")
        ]
