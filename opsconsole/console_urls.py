from django.urls import path

from alerts import inbox_views
from opsconsole import rule_pages, views

app_name = "console"
urlpatterns = [
    path("", views.runs, name="runs"),
    path("runbooks/<slug:name>/", views.runbook, name="runbook"),
    path("rules/", rule_pages.rule_list, name="rules"),
    path("rules/new/", rule_pages.rule_create, name="rule_new"),
    path("rules/<int:pk>/", rule_pages.rule_detail, name="rule"),
    path("rules/<int:pk>/edit/", rule_pages.rule_edit, name="rule_edit"),
    path("rules/<int:pk>/delete/", rule_pages.rule_delete, name="rule_delete"),
    path("runs/<path:run_id>/", views.run_detail, name="run"),
    path("inbox/", inbox_views.inbox, name="inbox"),
    path("inbox/alerts/<int:pk>/acknowledge/", inbox_views.acknowledge, name="inbox_acknowledge"),
    path("inbox/alerts/<int:pk>/resolve/", inbox_views.resolve, name="inbox_resolve"),
    path("inbox/alerts/<int:pk>/verdict/", inbox_views.verdict, name="inbox_verdict"),
    path("inbox/alerts/<int:pk>/mute/", inbox_views.mute, name="inbox_mute"),
]
