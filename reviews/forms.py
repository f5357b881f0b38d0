"""The pages' forms: they parse what a person typed; reviews/lifecycle.py decides whether it may be saved."""
from django import forms
from django.core.exceptions import ValidationError

from reviews.lifecycle import MAX_TEXT
from reviews.models import MAX_EVERY_HOURS, MIN_EVERY_HOURS, MIN_EVERY_STEPS, DecisionKind

_AREA = forms.Textarea(attrs={"rows": 2})


class CheckForm(forms.Form):
    note = forms.CharField(required=False, max_length=MAX_TEXT, widget=forms.TextInput(attrs={"placeholder": "what you saw (optional)"}))


class _EntryForm(forms.Form):
    observation = forms.CharField(max_length=MAX_TEXT, widget=_AREA, help_text="what was observed")
    explanations = forms.CharField(max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 3}),
                                   help_text="one or more competing explanations, one per line")
    action = forms.CharField(required=False, max_length=MAX_TEXT, widget=_AREA, help_text="what is done (intervene: what changes)")
    owner = forms.CharField(required=False, max_length=300, help_text="who owns what happens next")
    expected_next = forms.CharField(required=False, max_length=MAX_TEXT, widget=_AREA, label="Evidence expected next")
    next_step = forms.IntegerField(required=False, min_value=0, max_value=2**53 - 1, label="Next review at step")
    next_at = forms.DateTimeField(required=False, label="Next review at (UTC)",
                                  widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
                                  input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"])
    next_rule = forms.ChoiceField(required=False, label="Next review at the next alert of")

    FIELD_OF = {"next_review.step": "next_step", "next_review.at": "next_at", "next_review.rule": "next_rule",
                "next_review": "next_step", "links.evidence": None, "links": None, "review": None}

    def __init__(self, *args, rules=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["next_rule"].choices = [("", "—"), *((name, name) for name in rules)]

    def domain_fields(self) -> dict:
        data = self.cleaned_data
        trigger = {}
        if data.get("next_step") is not None:
            trigger["step"] = data["next_step"]
        if data.get("next_at"):
            trigger["at"] = data["next_at"].isoformat()
        if data.get("next_rule"):
            trigger["rule"] = data["next_rule"]
        return {
            "observation": data["observation"],
            "explanations": data["explanations"].splitlines(),
            "action": data.get("action", ""),
            "owner": data.get("owner", ""),
            "expected_next": data.get("expected_next", ""),
            "next_review": trigger or None,
        }

    def add_domain_errors(self, exc: ValidationError):
        for key, messages in (exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}).items():
            field = self.FIELD_OF.get(key, key)
            self.add_error(field if field in self.fields else None, [f"{key}: {m}" if field not in self.fields else m for m in messages])


class DecisionForm(_EntryForm):
    decision = forms.ChoiceField(choices=DecisionKind.choices, widget=forms.RadioSelect)
    evidence = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                         help_text="picked from steps 1-5")
    artifacts_preserved = forms.BooleanField(required=False, label="Terminate: the run's artifacts are preserved")
    accept_rewind = forms.BooleanField(required=False, label="Record the proposed rewind with the decision")
    run_finished_ok = forms.BooleanField(required=False, label="The run has finished: intervene or terminate it anyway")

    field_order = ["decision", "observation", "explanations", "action", "owner", "expected_next", "evidence",
                   "next_step", "next_at", "next_rule", "artifacts_preserved", "accept_rewind", "run_finished_ok"]

    def __init__(self, *args, evidence=(), run_finished=False, rewind_proposed=True, **kwargs):
        super().__init__(*args, **kwargs)
        if not run_finished:  # the acknowledgement is only asked where it means something
            del self.fields["run_finished_ok"]
        # No box to tick without a proposal; a posted form keeps the field so a forged tick reaches the domain,
        # which refuses it (reviews/lifecycle.py decide) instead of it being silently dropped.
        if not rewind_proposed and not self.is_bound:
            del self.fields["accept_rewind"]
        self.evidence_items = {key: item for key, _, item in evidence}
        self.fields["evidence"].choices = [(key, f"Step {number}: {item['label']}") for key, number, item in evidence]

    def domain_fields(self) -> dict:
        data = self.cleaned_data
        return {
            **super().domain_fields(),
            "decision": data["decision"],
            "evidence": [self.evidence_items[key] for key in data.get("evidence", [])],
            "artifacts_preserved": data.get("artifacts_preserved", False),
            "accept_rewind": data.get("accept_rewind", False),
            "run_finished_ok": data.get("run_finished_ok", False),
        }


class EntryForm(_EntryForm):
    corrects = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1, label="Corrects entry #",
                                  help_text="a correction names the entry it corrects; both stay in the log")
    decision = forms.ChoiceField(required=False, choices=[("", "unchanged"), *DecisionKind.choices], label="Corrected decision",
                                 help_text="a correction only: replaces the decision of the entry it corrects")
    artifacts_preserved = forms.BooleanField(required=False, label="Terminate: the run's artifacts are preserved")
    run_finished_ok = forms.BooleanField(required=False, label="The run has finished: intervene or terminate it anyway")

    def domain_fields(self) -> dict:
        data = self.cleaned_data
        return {**super().domain_fields(), "decision": data.get("decision", ""),
                "artifacts_preserved": data.get("artifacts_preserved", False),
                "run_finished_ok": data.get("run_finished_ok", False)}


class LogFilterForm(forms.Form):
    project = forms.SlugField(required=False, max_length=64)
    run = forms.CharField(required=False, max_length=128)
    decision = forms.ChoiceField(required=False, choices=[("", "any"), *DecisionKind.choices, ("none", "no decision (notes)")])
    owner = forms.CharField(required=False, max_length=300)
    since = forms.DateTimeField(required=False)
    until = forms.DateTimeField(required=False)


class ScheduleForm(forms.Form):
    every_steps = forms.IntegerField(required=False, min_value=MIN_EVERY_STEPS, max_value=2**53 - 1, label="every … steps")
    every_hours = forms.FloatField(required=False, min_value=MIN_EVERY_HOURS, max_value=MAX_EVERY_HOURS,
                                   label="every … hours of run time")

    def clean(self):
        data = super().clean()
        if data.get("every_steps") is None and data.get("every_hours") is None and not self.errors:
            self.add_error("every_steps", "give every_steps, every_hours or both")
        return data
