"""The console's rule form: the same governance validation as the API, each message on its field.

Scope, persistence and each kind's params are labelled inputs (alerts/rule_inputs.py reads them). The JSON boxes
stay, for rules as code: a JSON box with anything in it wins over its inputs, as a whole, one box at a time (an
empty box: the inputs are used). A stored value the inputs cannot say is shown in its box, so an edit keeps it.

`RuleForm.clean` calls `alerts.governance.governance_errors` (the one validation
every path shares); the view then saves through `alerts.rules.save_rule`, whose
`full_clean` is the backstop (any message it raises lands on its field too).
"""
import json

from django import forms
from django.core.exceptions import ValidationError

from alerts import rule_inputs
from alerts.describe import KIND_PARAMS
from alerts.governance import GOVERNANCE_FIELDS, SCOPE_KEYS, governance_errors
from alerts.models import PermittedResponse, Rule, RuleKind
from alerts.params import CHOICE, KIND_PARAMS as KIND_PARAM_SPECS, NAME, NOTES, WHOLE, params_errors
from alerts.rules import name_conflict

SCOPE_EXAMPLE = '{"metrics": ["loss"], "component": "", "phases": ["steady"], "runs": {"team": "pretrain"}}'
PERSISTENCE_EXAMPLE = '{"points": 3, "resolve_points": 10}'
PARAMS_EXAMPLE = '{"direction": "above", "width": 6.0}'


class JSONObjectField(forms.Field):
    """A JSON object typed into a textarea: malformed JSON or a non-object is an error on this field.

    An empty box is None (params: {}), so a missing scope or persistence gets
    the governance message, exactly as the API would give it.
    """

    widget = forms.Textarea

    def __init__(self, *, empty=None, **kwargs):
        self.empty = empty
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value):
        text = (value or "").strip() if isinstance(value, str) else value
        if text in (None, ""):
            return self.empty() if callable(self.empty) else self.empty
        if isinstance(text, dict):
            return text
        try:
            parsed = json.loads(text)
        except (TypeError, ValueError) as exc:
            where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
            raise ValidationError(f"not valid JSON: {getattr(exc, 'msg', exc)}{where}", code="malformed_json") from None
        if not isinstance(parsed, dict):
            raise ValidationError(
                f"write a JSON object, {{\"key\": value, …}}, not {_json_type(parsed)}", code="not_an_object"
            )
        return parsed

    def prepare_value(self, value):
        if isinstance(value, (dict, list)):
            text = json.dumps(value, ensure_ascii=False)
            return text if len(text) <= 72 else json.dumps(value, indent=2, ensure_ascii=False)
        return value

    def has_changed(self, initial, data):
        try:
            return self.to_python(data) != self.to_python(self.prepare_value(initial))
        except ValidationError:
            return True


def _json_type(value):
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"


class ParamErrorsOnParamsField:
    """Model validation names each params problem `params.<key>` (the API's path); a form has one params
    field, so the message (which names the key) goes there. Mixed into the console's and the admin's forms."""

    def add_error(self, field, error):
        if field is None and isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            folded = {}
            for key, errors in error.error_dict.items():
                folded.setdefault("params" if key.startswith("params.") else key, []).extend(errors)
            error = ValidationError(folded)
        super().add_error(field, error)


def _textarea(example, rows=4):
    return forms.Textarea(attrs={"rows": rows, "placeholder": example, "spellcheck": "false", "class": "mono"})


def _text(placeholder, **attrs):
    return forms.TextInput(attrs={"placeholder": placeholder, "autocomplete": "off", **attrs})


def _param_field(param) -> forms.Field:
    """One param of one kind as an input: its type decides the widget; empty is the kind's default."""
    default_words = param.default_words()
    meaning = param.meaning.replace("`", "")
    help_text = f"{meaning[0].upper()}{meaning[1:]}. {param.expectation()[0].upper()}{param.expectation()[1:]}" + (
        "; empty: unset." if default_words == "unset" else f"; empty: the default, {default_words}.")
    if param.type == CHOICE:
        choices = [("", f"default ({default_words})"), *[(c, c) for c in param.choices]]
        widget = forms.Select(choices=choices)
    elif param.type == NAME:
        widget = _text(default_words if default_words != "unset" else "")
    else:
        widget = forms.NumberInput(attrs={"step": "1" if param.type == WHOLE else "any",
                                          "placeholder": "" if default_words == "unset" else default_words})
    return forms.CharField(required=False, label=param.label, help_text=help_text, widget=widget)


# Which JSON box stands for which inputs: a box with anything in it replaces its inputs (JSON wins, per box).
JSON_HELP = "Empty: the inputs above are used. Anything here replaces them, as a whole (JSON wins)."


class RuleForm(ParamErrorsOnParamsField, forms.Form):
    name = forms.SlugField(
        max_length=100,
        help_text="Letters, digits, hyphens and underscores; unique in the project, e.g. loss-spike.",
        widget=forms.TextInput(attrs={"placeholder": "loss-spike", "autocomplete": "off"}),
    )
    project = forms.ModelChoiceField(queryset=None, to_field_name="slug", empty_label=None,
                                     help_text="Only projects where you are a rule admin.")
    kind = forms.ChoiceField(choices=[(k, k) for k in RuleKind.values],
                             help_text="What the rule detects; its own settings are under Kind settings below.")
    description = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2, "placeholder": "What it catches, in one sentence."})
    )
    enabled = forms.BooleanField(required=False, initial=True, help_text="A disabled rule is kept but never evaluated.")
    # The five governance fields: not `required` at the form level, so an empty one
    # gets governance_errors' message (what the API says), not a generic one.
    owner = forms.CharField(
        required=False,
        max_length=300,
        help_text="A person or team with a contact: NAME <CONTACT>.",
        widget=forms.TextInput(attrs={"placeholder": "Pretrain on-call <#pretrain-oncall>"}),
    )
    diagnostic_url = forms.CharField(
        required=False,
        max_length=500,
        label="Diagnostic URL",
        help_text="The runbook or dashboard to open first (http or https).",
        widget=forms.URLInput(attrs={"placeholder": "https://runbooks.example/loss-spike"}),
    )
    permitted_response = forms.ChoiceField(
        required=False,
        choices=[("", "— choose —"), *[(r, r) for r in PermittedResponse.values]],
        help_text="observe, notify, review; stop and rewind only on hard-invariant kinds (nonfinite, absence).",
    )

    # Scope, in inputs (alerts/rule_inputs.py turns them into the stored object).
    scope_metrics = forms.CharField(required=False, label="Metrics", widget=_text("loss, grad_norm*"),
                                    help_text="Metric names or glob patterns, separated by commas.")
    scope_conditions = forms.CharField(required=False, label="Event conditions", widget=_text("loss_scale_collapse"),
                                       help_text="Event rules: the health events the job reports, separated by commas.")
    scope_components = forms.ChoiceField(required=False, label="Components", choices=rule_inputs.COMPONENT_CHOICES,
                                         initial=rule_inputs.EVERY)
    scope_component = forms.CharField(required=False, label="Component pattern", widget=_text("blocks.*"),
                                      help_text="A glob pattern, with “components matching the pattern below”.")
    scope_layer = forms.CharField(required=False, label="Layer", widget=_text("any layer"),
                                  help_text="Empty: any layer.")
    scope_phases = forms.CharField(required=False, label="Phases", widget=_text("steady, eval"),
                                   help_text="Only these phases, separated by commas. Empty: every phase (threshold "
                                   "and band rules skip warmup, eval, checkpoint, restart and data_refresh).")
    scope_runs = forms.CharField(required=False, label="Run tags", widget=_text("team=pretrain"),
                                 help_text="Only runs with these tags, key=value separated by commas. Empty: every run "
                                 "of the project.")
    # Persistence, in inputs.
    persistence_count = forms.CharField(required=False, label="Fire after",
                                        widget=forms.NumberInput(attrs={"step": "any", "min": "0", "placeholder": "3"}))
    persistence_unit = forms.ChoiceField(required=False, label="Counted in", choices=rule_inputs.UNIT_CHOICES,
                                         initial=rule_inputs.POINTS)
    persistence_resolve_points = forms.CharField(
        required=False, label="Resolve after", help_text="Clear points in a row. Empty: the first clear point.",
        widget=forms.NumberInput(attrs={"step": "1", "min": "1", "placeholder": "1"}))
    persistence_until_reviewed = forms.BooleanField(
        required=False, label="Then wait for a person (needs review)",
        help_text="After its condition clears, the alert waits for a person, as a hard invariant's does.")

    # The JSON boxes, for rules as code (the "Advanced: edit as JSON" part of the page).
    scope = JSONObjectField(label="Scope as JSON", widget=_textarea(SCOPE_EXAMPLE),
                            help_text="A JSON object with metrics (glob patterns) or conditions; optionally "
                            f"{', '.join(sorted(SCOPE_KEYS - {'metrics', 'conditions'}))}. {JSON_HELP}")
    persistence = JSONObjectField(label="Persistence as JSON", widget=_textarea(PERSISTENCE_EXAMPLE, rows=2),
                                  help_text="A JSON object with exactly one of points, steps, seconds; optionally "
                                  f"resolve_points, until_reviewed. {JSON_HELP}")
    params = JSONObjectField(empty=dict, label="Kind settings as JSON", widget=_textarea(PARAMS_EXAMPLE, rows=3),
                             help_text=f"A JSON object of the kind's params ({{}} for its defaults). {JSON_HELP}")

    GOVERNANCE = GOVERNANCE_FIELDS
    SECTIONS = (
        ("Rule", ("name", "project", "kind", "description", "enabled")),
        ("Governance", ("owner", "diagnostic_url", "permitted_response")),
    )
    SCOPE_INPUTS = ("scope_metrics", "scope_conditions", "scope_components", "scope_component", "scope_layer",
                    "scope_phases", "scope_runs")
    PERSISTENCE_INPUTS = ("persistence_count", "persistence_unit", "persistence_resolve_points",
                          "persistence_until_reviewed")
    JSON_FIELDS = ("scope", "persistence", "params")

    def __init__(self, *args, projects, instance: Rule | None = None, **kwargs):
        self.instance = instance
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = self._initial_from(instance)
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = projects
        if instance is None and not self.is_bound and "project" not in self.initial:
            first = projects.first()
            if first is not None:
                self.initial["project"] = first
        for name in GOVERNANCE_FIELDS:
            self.fields[name].governance = True
        for kind, params in KIND_PARAM_SPECS.items():
            for param in params:
                self.fields[rule_inputs.input_name(kind, param)] = _param_field(param)

    @staticmethod
    def _initial_from(rule: Rule) -> dict:
        """The rule in the inputs; a scope, persistence or params the inputs cannot say stays in its JSON box."""
        initial = {**rule.snapshot(), "project": rule.project}
        for field, inputs in (
            ("scope", rule_inputs.scope_inputs(rule.scope)),
            ("persistence", rule_inputs.persistence_inputs(rule.persistence)),
            ("params", rule_inputs.params_inputs(rule.kind, rule.params)),
        ):
            if inputs is not None:
                initial.update(inputs)
                initial[field] = None
        return initial

    def sections(self):
        return [(title, [self[name] for name in names]) for title, names in self.SECTIONS]

    def scope_inputs(self):
        return [self[name] for name in self.SCOPE_INPUTS]

    def persistence_inputs(self):
        return [self[name] for name in self.PERSISTENCE_INPUTS]

    def kind_fieldsets(self):
        """[(kind, title, note, bound fields)] for every kind: the page shows them all, static/js/rule-form.js
        only the chosen kind's."""
        return [(kind, rule_inputs.kind_title(kind), NOTES.get(kind, ""),
                 [self[rule_inputs.input_name(kind, p)] for p in params])
                for kind, params in KIND_PARAM_SPECS.items()]

    def json_fields(self):
        return [self[name] for name in self.JSON_FIELDS]

    def json_open(self) -> bool:
        """Open the JSON part when it is in use: something typed there, or a stored value only JSON can say."""
        if self.is_bound:
            return any(self.json_given(name) for name in self.JSON_FIELDS)
        return any(self.initial.get(name) not in (None, "", {}) for name in self.JSON_FIELDS)

    def json_given(self, name) -> bool:
        return bool(str(self.data.get(self.add_prefix(name), "")).strip())

    @property
    def kind_params(self):
        return KIND_PARAMS.items()

    def clean(self):
        data = super().clean()
        kind = data.get("kind")
        from_inputs = {
            "scope": lambda: rule_inputs.scope_from(data),
            "persistence": lambda: rule_inputs.persistence_from(data),
            "params": lambda: rule_inputs.params_from(kind, data),
        }
        wrong_inputs = set()
        for field, build in from_inputs.items():
            if self.json_given(field):
                continue  # JSON wins: cleaned_data has it parsed, or the field has the parse error
            value, errors = build()
            for name, message in errors.items():
                self.add_error(name, message)
            data[field] = value
            if errors:
                wrong_inputs.add(field)
        errors = governance_errors(
            kind=kind,
            owner=data.get("owner"),
            scope=data.get("scope"),
            persistence=data.get("persistence"),
            diagnostic_url=data.get("diagnostic_url"),
            permitted_response=data.get("permitted_response"),
        )
        for field, message in errors.items():
            # Malformed JSON, an invalid choice or a wrong input already says what is wrong.
            if field not in self.errors and field not in wrong_inputs:
                self.add_error(field, self._in_words(field, message))
        if self.json_given("params") and "params" not in self.errors and "kind" not in self.errors:
            for message in params_errors(kind, data.get("params")).values():
                self.add_error("params", message)
        if "name" not in self.errors:
            conflict = name_conflict(data.get("project"), data.get("name"), self.instance)
            if conflict:
                self.add_error("name", conflict)
        return data
    def _in_words(self, field, message):
        """governance_errors' message with its leading key ("diagnostic_url is required: …", as the API says it)
        written as the field's label beside the input ("Diagnostic URL is required: …"). Scope, persistence and
        params keep theirs: the page puts "Scope: " before them, and their keys are the JSON box's own words."""
        if field in ("scope", "persistence", "params") or not message.startswith(f"{field} "):
            return message
        bound = self[field]
        return f"{bound.label} {message[len(field) + 1:]}"

    def apply(self, rule: Rule) -> Rule:
        """Copy the cleaned values onto a rule (new or existing), unsaved."""
        for field in ("name", "project", "kind", "description", "enabled", *GOVERNANCE_FIELDS, "params"):
            setattr(rule, field, self.cleaned_data[field])
        return rule

    def add_model_errors(self, exc: ValidationError):
        """Put save_rule's (full_clean's) messages on their fields (params.<key> on params), the rest above the form."""
        for field, messages in exc.message_dict.items():
            field = "params" if field.startswith("params.") else field
            for message in messages:
                self.add_error(field if field in self.fields else None, message)
