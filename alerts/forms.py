"""The console's rule form: the same governance validation as the API, each message on its field.

`RuleForm.clean` calls `alerts.governance.governance_errors` (the one validation
every path shares); the view then saves through `alerts.rules.save_rule`, whose
`full_clean` is the backstop (any message it raises lands on its field too).
"""
import json

from django import forms
from django.core.exceptions import ValidationError

from alerts.describe import KIND_PARAMS
from alerts.governance import GOVERNANCE_FIELDS, SCOPE_KEYS, governance_errors
from alerts.models import PermittedResponse, Rule, RuleKind
from alerts.params import params_errors
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


class RuleForm(ParamErrorsOnParamsField, forms.Form):
    name = forms.SlugField(
        max_length=100,
        help_text="Letters, digits, hyphens and underscores; unique in the project, e.g. loss-spike.",
        widget=forms.TextInput(attrs={"placeholder": "loss-spike", "autocomplete": "off"}),
    )
    project = forms.ModelChoiceField(queryset=None, to_field_name="slug", empty_label=None,
                                     help_text="Only projects where you are a rule admin.")
    kind = forms.ChoiceField(choices=[(k, k) for k in RuleKind.values], help_text="What the rule detects; its settings go in params below.")
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
    scope = JSONObjectField(
        widget=_textarea(SCOPE_EXAMPLE),
        help_text="JSON object with metrics (glob patterns) or conditions; optionally "
        f"{', '.join(sorted(SCOPE_KEYS - {'metrics', 'conditions'}))}.",
    )
    # Shown as code after the help (templates/alerts/rule_form.html): JSON in the help's prose would read as a leak.
    scope.examples = [("e.g.", SCOPE_EXAMPLE)]
    persistence = JSONObjectField(
        widget=_textarea(PERSISTENCE_EXAMPLE, rows=2),
        help_text="JSON object with exactly one of points, steps, seconds; optionally resolve_points.",
    )
    persistence.examples = [("e.g.", PERSISTENCE_EXAMPLE)]
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
    params = JSONObjectField(
        empty=dict,
        widget=_textarea(PARAMS_EXAMPLE, rows=3),
        help_text="JSON object of the kind's settings; leave empty for the kind's defaults.",
    )

    GOVERNANCE = GOVERNANCE_FIELDS
    SECTIONS = (
        ("Rule", ("name", "project", "kind", "description", "enabled")),
        ("Governance", GOVERNANCE_FIELDS),
        ("Kind settings", ("params",)),
    )

    def __init__(self, *args, projects, instance: Rule | None = None, **kwargs):
        self.instance = instance
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {**instance.snapshot(), "project": instance.project}
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = projects
        if instance is None and not self.is_bound and "project" not in self.initial:
            first = projects.first()
            if first is not None:
                self.initial["project"] = first
        for name in GOVERNANCE_FIELDS:
            self.fields[name].governance = True

    def sections(self):
        return [(title, [self[name] for name in names]) for title, names in self.SECTIONS]

    @property
    def kind_params(self):
        return KIND_PARAMS.items()

    def clean(self):
        data = super().clean()
        errors = governance_errors(
            kind=data.get("kind"),
            owner=data.get("owner"),
            scope=data.get("scope"),
            persistence=data.get("persistence"),
            diagnostic_url=data.get("diagnostic_url"),
            permitted_response=data.get("permitted_response"),
        )
        for field, message in errors.items():
            if field not in self.errors:  # malformed JSON or an invalid choice already says what is wrong
                self.add_error(field, message)
        if "params" not in self.errors and "kind" not in self.errors:
            for message in params_errors(data.get("kind"), data.get("params")).values():
                self.add_error("params", message)
        if "name" not in self.errors:
            conflict = name_conflict(data.get("project"), data.get("name"), self.instance)
            if conflict:
                self.add_error("name", conflict)
        return data

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
