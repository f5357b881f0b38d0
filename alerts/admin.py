from django.contrib import admin

from alerts.models import Rule, RuleRevision
from alerts.rules import delete_rule, save_rule


@admin.register(Rule)
class RuleAdmin(admin.ModelAdmin):
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
