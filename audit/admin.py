from django.contrib import admin

from audit.models import LinkCheck, SentReport


@admin.register(LinkCheck)
class LinkCheckAdmin(admin.ModelAdmin):
    list_display = ("rule", "url", "ok", "status_code", "checked_at")
    list_filter = ("ok",)
    readonly_fields = [f.name for f in LinkCheck._meta.fields]


@admin.register(SentReport)
class SentReportAdmin(admin.ModelAdmin):
    list_display = ("project", "owner", "since", "until", "sent_at")
    readonly_fields = [f.name for f in SentReport._meta.fields]
