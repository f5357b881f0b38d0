from django.contrib import admin

from ingest.models import Project, ProjectToken, Run


class TokenInline(admin.TabularInline):
    model = ProjectToken
    fields = ["hint", "created_at", "revoked_at"]
    readonly_fields = ["hint", "created_at"]
    extra = 0
    can_delete = False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "owner_name", "owner_contact", "read_only"]
    inlines = [TokenInline]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["run_id", "project", "status", "last_step", "attempt", "reference", "last_seen_at"]
    list_filter = ["project", "status", "reference"]
    search_fields = ["run_id", "name"]
    # Telemetry bookkeeping is ingest's; only whether a run is a reference is an operator's choice.
    readonly_fields = [f.name for f in Run._meta.fields if f.name != "reference"]
