from django.contrib import admin

from reviews.models import LogEntry, Review, ReviewSchedule


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "trigger", "state", "opened_at", "decided_at")
    list_filter = ("trigger", "state")
    readonly_fields = [f.name for f in Review._meta.fields]


@admin.register(ReviewSchedule)
class ReviewScheduleAdmin(admin.ModelAdmin):
    list_display = ("project", "run", "every_steps", "every_hours")


@admin.register(LogEntry)
class LogEntryAdmin(admin.ModelAdmin):
    """Read-only: the database refuses changes to the log, so the admin offers none."""

    list_display = ("id", "run", "decision", "owner", "at")

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
