from django import forms
from django.contrib import admin

from alerts.forms import ParamErrorsOnParamsField
from alerts.models import Incident, IncidentSettings, Mute, MuteSettings, Rule, RuleFault, RuleRevision
from alerts.rules import delete_rule, save_rule


class RuleAdminForm(ParamErrorsOnParamsField, forms.ModelForm):
    class Meta:
        model = Rule
        fields = "__all__"


@admin.register(Rule)
class RuleAdmin(admin.ModelAdmin):
    form = RuleAdminForm
    list_display = ["name", "project", "kind", "owner", "permitted_response", "enabled"]
    list_filter = ["project", "kind", "permitted_response", "enabled"]

    def save_model(self, request, obj, form, change):
        save_rule(obj, user=request.user, source="admin")

    def delete_model(self, request, obj):
        delete_rule(obj, user=request.user, source="admin")


@admin.register(RuleRevision)
class RuleRevisionAdmin(admin.ModelAdmin):
    list_display = ["rule_name", "project", "action", "changed_by", "source", "changed_at"]
    readonly_fields = [f.name for f in RuleRevision._meta.fields]


@admin.register(Mute)
class MuteAdmin(admin.ModelAdmin):
    """Read-only: mutes are made through the inbox or the API (alerts/triage.py), which check reason and expiry."""

    list_display = ["id", "project", "rule", "scope", "run", "component", "reason", "expires_at", "created_by", "ended_at"]
    list_filter = ["project", "scope"]
    readonly_fields = [f.name for f in Mute._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(RuleFault)
class RuleFaultAdmin(admin.ModelAdmin):
    """Read-only: evaluation records a rule's failures and recoveries (alerts/faults.py)."""

    list_display = ["id", "rule", "kind", "run", "receipt", "at", "error"]
    list_filter = ["kind"]
    readonly_fields = [f.name for f in RuleFault._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(IncidentSettings)
class IncidentSettingsAdmin(admin.ModelAdmin):
    """A project's incident window (alerts/incidents.py); a project without a row uses the default."""

    list_display = ["project", "window_steps"]


@admin.register(MuteSettings)
class MuteSettingsAdmin(admin.ModelAdmin):
    """A project's longest mute (past it needs a rule admin) and the days unused after which a mute ends itself."""

    list_display = ["project", "max_duration_hours", "unused_days"]


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    """Read-only: evaluation groups alerts into incidents; people act on them in the inbox or the API."""

    list_display = ["id", "run", "state", "severity", "first_step", "origin", "opened_at", "resolved_at"]
    list_filter = ["state", "severity"]
    readonly_fields = [f.name for f in Incident._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
