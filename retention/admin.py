"""The admin's delete of runs and projects goes through retention/purge.py, and its confirmation counts rows.

Django's own confirmation lists every related row (every block of a run: 781 KB and 5.7 s for a 1 M-point
run) and its delete loads them all (a 30 M-point project grew a worker to 2.5 GB). These admins replace
ingest's: the confirmation says what goes in a few counts, and the delete runs in chunks.
"""
from django.contrib import admin
from django.db.models import Sum

from alerts.models import Alert
from ingest.admin import ProjectAdmin, RunAdmin
from ingest.models import BatchReceipt, Project, Run
from retention.models import RetentionPolicy, RunArchive
from retention.purge import delete_project, delete_run


def _summary(runs) -> list[str]:
    points = BatchReceipt.objects.filter(run__in=runs).aggregate(n=Sum("points"))["n"] or 0
    alerts = Alert.objects.filter(run__in=runs).count()
    return [f"{runs.count():,} run(s) with {points:,} points and {alerts:,} alerts: deleted in chunks, "
            "or archived (points deleted, the rest kept) where the decision log names them"]


class ChunkedRunAdmin(RunAdmin):
    def get_deleted_objects(self, objs, request):
        runs = Run.objects.filter(pk__in=[o.pk for o in objs])
        return _summary(runs), {"runs": runs.count()}, set(), []

    def delete_model(self, request, obj):
        delete_run(obj, by=request.user)

    def delete_queryset(self, request, queryset):
        for run in queryset:
            delete_run(run, by=request.user)


class ChunkedProjectAdmin(ProjectAdmin):
    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def get_deleted_objects(self, objs, request):
        projects = [o.pk for o in objs]
        lines = [f"project(s) {', '.join(str(o) for o in objs)}; archived instead where its decision log holds entries",
                 *_summary(Run.objects.filter(project__in=projects))]
        return lines, {"projects": len(projects)}, set(), []

    def delete_model(self, request, obj):
        delete_project(obj, by=request.user)

    def delete_queryset(self, request, queryset):
        for project in queryset:
            delete_project(project, by=request.user)


admin.site.unregister(Run)
admin.site.register(Run, ChunkedRunAdmin)
admin.site.unregister(Project)
admin.site.register(Project, ChunkedProjectAdmin)


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    list_display = ["project", "retention_days", "rollup_retention_days", "alert_retention_days",
                    "incident_retention_days", "review_retention_days", "points_pruned_before"]
    readonly_fields = ["points_pruned_before", "rollups_pruned_before"]


@admin.register(RunArchive)
class RunArchiveAdmin(admin.ModelAdmin):
    list_display = ["run", "archived_at", "reason", "by"]
    readonly_fields = ["run", "archived_at", "reason", "by"]
