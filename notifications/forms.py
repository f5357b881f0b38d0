"""The console's channel form: the same checks as the API (notifications/channels.py), the secret write-only."""
import json

from django import forms
from django.core.exceptions import ValidationError

from notifications.channels import changed_fields, channel_errors, snapshot
from notifications.models import Channel, ChannelKind


class ChannelForm(forms.Form):
    project = forms.ModelChoiceField(queryset=None, to_field_name="slug")
    name = forms.SlugField(max_length=100)
    kind = forms.ChoiceField(choices=ChannelKind.choices)
    url = forms.CharField(max_length=500, required=False, label="URL",
                          help_text="webhook or Slack URL, the Alertmanager's base URL, the MLflow tracking URI; none for email")
    secret = forms.CharField(max_length=500, required=False, strip=False,
                             widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
                             help_text="signing key or bearer token; never shown again. Left blank: kept as it is")
    clear_secret = forms.BooleanField(required=False, label="Remove the stored secret")
    config = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}),
                             help_text="JSON settings of the kind:")
    # Shown as code after the help (templates/notifications/channel_form.html), never as JSON in prose.
    config.examples = [("email", '{"recipients": [...]}'), ("Alertmanager", '{"labels": {...}}'),
                       ("MLflow", '{"run_id_tag": ..., "runs": {...}}')]
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args, projects, channel=None, **kwargs):
        if channel is not None:
            kwargs.setdefault("initial", {}).update({
                "project": channel.project, "name": channel.name, "kind": channel.kind, "url": channel.url,
                "config": json.dumps(channel.config, indent=2) if channel.config else "", "enabled": channel.enabled})
        super().__init__(*args, **kwargs)
        self.channel = channel
        self.fields["project"].queryset = projects
        if channel is not None:
            self.fields["project"].disabled = True

    def clean_config(self):
        text = self.cleaned_data.get("config", "").strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ValidationError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValidationError("must be a JSON object")
        return value

    def clean(self):
        data = super().clean()
        if "kind" in data and "config" in data:
            for path, message in channel_errors(data["kind"], data.get("url", ""), data["config"],
                                                 enabled=data.get("enabled", True)).items():
                field = path.split(".")[0]
                self.add_error(field if field in self.fields else None, message if field == path else f"{path}: {message}")
        return data

    def apply(self) -> tuple[Channel, list[str]]:
        """The channel with the form's values, and the names of the fields it changed."""
        channel = self.channel or Channel(project=self.cleaned_data["project"])
        before = snapshot(channel) if self.channel else {}
        for field in ("name", "kind", "url", "config", "enabled"):
            setattr(channel, field, self.cleaned_data[field])
        if self.cleaned_data["clear_secret"]:
            channel.secret = ""
        elif self.cleaned_data["secret"]:
            channel.secret = self.cleaned_data["secret"]
        changed = changed_fields(before, channel) if self.channel else None
        return channel, changed

    def add_model_errors(self, exc: ValidationError):
        for path, messages in exc.message_dict.items():
            field = path.split(".")[0]
            for message in messages:
                self.add_error(field if field in self.fields else None, message)
