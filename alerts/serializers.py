from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers

from alerts import faults
from alerts.backtest import MAX_RUNS, BadSelection, chosen_runs
from alerts.governance import judging_errors
from alerts.models import BacktestState, Rule
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


class _DraftProjectField(VisibleProjectField):
    """The caller's visible projects; every project for the console's own command (context `all_projects`)."""

    def get_queryset(self):
        return Project.objects.all() if self.context.get("all_projects") else super().get_queryset()


class DraftRuleSerializer(RuleSerializer):
    """A rule as the rules API takes it, checked the same way but never saved: what a backtest judges with.

    The rule admin check is the backtest view's (it starts a job in the rule's project); a name another rule
    has is no conflict (a rule being edited backtests under its own name).
    """

    project = _DraftProjectField(slug_field="slug", queryset=Project.objects.all())

    def validate_project(self, project):
        return project

    def validate(self, attrs):
        return attrs

    def draft(self) -> Rule:
        """The validated rule, unsaved, with the model's own governance and params checks (400 naming the field)."""
        rule = Rule(**self.validated_data)
        try:
            rule.full_clean(validate_unique=False, validate_constraints=False)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return rule


class BacktestRequestSerializer(JsonTypesMixin, serializers.Serializer):
    """Which rule to backtest (a saved one by id, or a draft given by its fields) and which runs to replay."""

    rule = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1,
                                    help_text="a saved rule's id; without it, the body's rule fields are the draft")
    compare_with = serializers.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1,
        help_text="the saved rule a draft edits (same project): replayed over the same runs, the result's "
                  "`compared` says what the edit changes")
    runs = serializers.ListField(child=serializers.CharField(max_length=128), required=False, allow_empty=False,
                                 max_length=MAX_RUNS, help_text=f"run ids to replay (at most {MAX_RUNS})")
    project = serializers.SlugField(required=False, help_text="the draft's project; for a saved rule, its own")
    tags = serializers.DictField(child=serializers.JSONField(), required=False, help_text="runs with these tags")
    since = serializers.DateTimeField(required=False, help_text="runs last seen at or after this time")
    until = serializers.DateTimeField(required=False, help_text="runs created at or before this time")
    # The draft's fields, as POST /api/v1/rules/ takes them (checked by DraftRuleSerializer when `rule` is absent).
    name = serializers.CharField(required=False)
    kind = serializers.CharField(required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    owner = serializers.CharField(required=False, allow_blank=True)
    scope = serializers.JSONField(required=False)
    persistence = serializers.JSONField(required=False)
    diagnostic_url = serializers.CharField(required=False, allow_blank=True)
    permitted_response = serializers.CharField(required=False, allow_blank=True)
    params = serializers.JSONField(required=False)
    enabled = serializers.BooleanField(required=False)

    def validate(self, attrs):
        if "since" in attrs and "until" in attrs and attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"until": "until must not be before since"})
        return attrs

    def rule_and_runs(self):
        """(the rule to judge with, the runs to replay); 404 for a saved rule the caller cannot see, else 400s."""
        asked = self.validated_data
        if "rule" in asked:
            rules = Rule.objects.select_related("project")
            if not self.context.get("all_projects"):
                rules = rules.filter(project__in=visible_projects(self.context["request"].user))
            rule = rules.filter(pk=asked["rule"]).first()
            if rule is None:
                raise exceptions.NotFound("no such rule")
            broken = judging_errors(kind=rule.kind, scope=rule.scope, persistence=rule.persistence, params=rule.params)
            if broken:  # stored before validation existed: the live engine does not judge with it either
                raise serializers.ValidationError({"rule": f"rule {rule.pk} cannot be judged: {faults.invalid_text(broken)}"})
            if asked.get("project") not in (None, rule.project.slug):
                raise serializers.ValidationError({"project": f"rule {rule.pk} belongs to project {rule.project.slug}"})
        else:
            draft = DraftRuleSerializer(data=self.initial_data, context=self.context)
            draft.is_valid(raise_exception=True)
            rule = draft.draft()
        try:
            runs = chosen_runs(rule.project, run_ids=asked.get("runs"), tags=asked.get("tags"), since=asked.get("since"),
                               until=asked.get("until"))
        except BadSelection as exc:
            raise serializers.ValidationError({exc.field: str(exc)}) from None
        return rule, runs

    def compared_rule(self, rule):
        """The saved rule `compare_with` names, in the draft's project (400 if not, or if `rule` is not a draft)."""
        asked = self.validated_data
        if "compare_with" not in asked:
            return None
        if rule.pk:
            raise serializers.ValidationError({"compare_with": "a saved rule's backtest is compared with nothing: "
                                                               "give the draft's fields instead of `rule`"})
        saved = Rule.objects.filter(pk=asked["compare_with"], project=rule.project).first()
        if saved is None:
            raise serializers.ValidationError(
                {"compare_with": f"no rule {asked['compare_with']} in project {rule.project.slug}"})
        return saved


class WouldFireSerializer(serializers.Serializer):
    run = serializers.CharField()
    component = serializers.CharField(allow_blank=True)
    metric = serializers.CharField(allow_blank=True)
    condition = serializers.CharField(allow_blank=True)
    first_step = serializers.IntegerField()
    fired_step = serializers.IntegerField()
    last_step = serializers.IntegerField()
    magnitude = serializers.FloatField(allow_null=True)
    unit = serializers.CharField(allow_blank=True)
    phase = serializers.CharField(allow_blank=True)
    resolved_step = serializers.IntegerField(allow_null=True)
    resolved = serializers.BooleanField()


class FalseAlarmPredictionSerializer(serializers.Serializer):
    verdicts = serializers.IntegerField(help_text="verdicts on stored alerts overlapping the would-be alerts")
    false_alarm = serializers.IntegerField()
    actionable = serializers.IntegerField()
    rate = serializers.FloatField(allow_null=True, help_text="false_alarm / verdicts; null: no prediction")
    interval = serializers.ListField(child=serializers.FloatField(), allow_null=True, help_text="Wilson 95%")
    prediction = serializers.CharField()


class BacktestFaultSerializer(serializers.Serializer):
    run = serializers.CharField()
    batch = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()


class BacktestResultSerializer(serializers.Serializer):
    rule = serializers.IntegerField(allow_null=True, help_text="the saved rule's id; null for a draft")
    runs = serializers.IntegerField(help_text="runs replayed")
    runs_with_alerts = serializers.IntegerField()
    alerts = serializers.IntegerField()
    pages = serializers.IntegerField(help_text="alerts of a notify or review rule")
    false_alarms = FalseAlarmPredictionSerializer()
    would_fire = WouldFireSerializer(many=True)
    faults = BacktestFaultSerializer(many=True, help_text="a run whose replay the rule stopped by raising")
    limits = serializers.ListField(child=serializers.CharField(), help_text="what a backtest cannot reproduce")


class BacktestCutSerializer(serializers.Serializer):
    by = serializers.ChoiceField(["seconds", "points"], help_text="which budget ran out")
    points = serializers.IntegerField(help_text="points judged")
    seconds = serializers.FloatField(help_text="seconds the replay took")
    max_points = serializers.IntegerField()
    max_seconds = serializers.IntegerField()
    judged = serializers.ListField(child=serializers.DictField(), help_text="per run: run, first_step, last_step, complete")
    message = serializers.CharField(help_text='"stopped after N points / T s …; run R: steps X–Y judged …"')


class BacktestFiguresSerializer(serializers.Serializer):
    alerts = serializers.IntegerField()
    runs_with_alerts = serializers.IntegerField()
    pages = serializers.IntegerField()


class BacktestSavedFiguresSerializer(BacktestFiguresSerializer):
    would_fire = WouldFireSerializer(many=True)
    faults = BacktestFaultSerializer(many=True)


class BacktestRunChangeSerializer(serializers.Serializer):
    run = serializers.CharField()
    draft = serializers.IntegerField(help_text="alerts the draft fires on the run")
    saved = serializers.IntegerField(help_text="alerts the saved rule fires on the run")


class BacktestComparisonSerializer(serializers.Serializer):
    rule = serializers.IntegerField(allow_null=True, help_text="the saved rule's id (null: deleted since)")
    name = serializers.CharField()
    runs = serializers.ListField(child=serializers.CharField(), help_text="the runs both were judged on")
    complete = serializers.BooleanField(help_text="false: the budget ran out before every run was compared")
    draft = BacktestFiguresSerializer(help_text="the draft's figures on those runs")
    saved = BacktestSavedFiguresSerializer(help_text="the saved rule's, replayed the same way")
    change = BacktestFiguresSerializer(help_text="draft minus saved, per figure")
    runs_gaining = BacktestRunChangeSerializer(many=True, help_text="runs where the draft fires more alerts")
    runs_losing = BacktestRunChangeSerializer(many=True, help_text="runs where the draft fires fewer alerts")
    message = serializers.CharField(help_text='"Draft: 1 alert on 1 of 4 runs, 1 page — saved rule: 3 alerts on 2 of '
                                              '4 runs, 2 pages (2 fewer alerts, 1 fewer page; run b no longer alerts)"')


class BacktestJobResultSerializer(BacktestResultSerializer):
    points = serializers.IntegerField(help_text="points judged")
    cut = BacktestCutSerializer(allow_null=True, help_text="null when every batch of every run was judged")
    compared = BacktestComparisonSerializer(allow_null=True, help_text="null unless the draft edits a saved rule")


class BacktestProgressSerializer(serializers.Serializer):
    runs_done = serializers.IntegerField(help_text="runs replayed so far (with both rules when compared)")
    runs = serializers.IntegerField(help_text="runs to replay")
    message = serializers.CharField(help_text='"Backtest running: 2 of 4 runs replayed"')


class BacktestJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    project = serializers.CharField()
    rule = serializers.IntegerField(allow_null=True, help_text="the saved rule's id; null for a draft")
    draft = serializers.DictField(allow_null=True, help_text="the draft rule's fields; null for a saved rule")
    asked = serializers.DictField(help_text="the runs as asked: runs, tags, since, until")
    runs = serializers.ListField(child=serializers.CharField(), help_text="the run ids chosen at the start")
    started_by = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(BacktestState.values)
    progress = BacktestProgressSerializer()
    compared_with = serializers.IntegerField(allow_null=True, help_text="the saved rule the draft is compared with")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True, help_text="why it failed")
    result = BacktestJobResultSerializer(allow_null=True, help_text="when done or cut")
