"""The alerts app's routes: rules, alerts and the inbox, as API (under /api/v1/) and pages (under /)."""
from django.urls import path
from rest_framework.routers import SimpleRouter

from alerts import api, pages

router = SimpleRouter()
router.register("rules", api.RuleViewSet, basename="rule")

api_urlpatterns = [
    path("alerts/", api.AlertListView.as_view(), name="alerts"),
    path("alerts/<int:pk>/", api.AlertDetailView.as_view(), name="alert-detail"),
    path("alerts/<int:pk>/acknowledge/", api.AcknowledgeView.as_view(), name="alert-acknowledge"),
    path("alerts/<int:pk>/resolve/", api.ResolveView.as_view(), name="alert-resolve"),
    path("alerts/<int:pk>/verdict/", api.VerdictView.as_view(), name="alert-verdict"),
    path("alerts/<int:pk>/new-normal/", api.NewNormalView.as_view(), name="alert-new-normal"),
    path("alerts/<int:pk>/mute/", api.MuteView.as_view(), name="alert-mute"),
    path("mutes/<int:pk>/", api.MuteDetailView.as_view(), name="mute-detail"),
    path("mutes/<int:pk>/comments/", api.MuteCommentView.as_view(), name="mute-comments"),
    path("mutes/<int:pk>/extend/", api.MuteExtendView.as_view(), name="mute-extend"),
    path("mutes/<int:pk>/end/", api.MuteEndView.as_view(), name="mute-end"),
    path("inbox/", api.InboxView.as_view(), name="inbox"),
    path("backtests/<int:pk>/", api.BacktestJobView.as_view(), name="backtest-detail"),
    path("incidents/", api.IncidentListView.as_view(), name="incidents"),
    path("incidents/<int:pk>/acknowledge/", api.IncidentAcknowledgeView.as_view(), name="incident-acknowledge"),
    path("incidents/<int:pk>/verdict/", api.IncidentVerdictView.as_view(), name="incident-verdict"),
    path("incidents/<int:pk>/mute/", api.IncidentMuteView.as_view(), name="incident-mute"),
    *router.urls,
]
page_urlpatterns = [
    path("runbooks/<slug:name>/", pages.runbook, name="runbook"),
    path("rules/", pages.rule_list, name="rules"),
    path("rules/new/", pages.rule_create, name="rule_new"),
    path("rules/backtest/", pages.rule_backtest, name="rule_backtest"),
    path("rules/backtests/<int:pk>/", pages.backtest_page, name="backtest"),
    path("rules/<int:pk>/", pages.rule_detail, name="rule"),
    path("rules/<int:pk>/edit/", pages.rule_edit, name="rule_edit"),
    path("rules/<int:pk>/delete/", pages.rule_delete, name="rule_delete"),
    path("mutes/", pages.mute_list, name="mutes"),
    path("mutes/<int:pk>/", pages.mute_detail, name="mute"),
    path("mutes/<int:pk>/comments/", pages.mute_comment, name="mute_comment"),
    path("inbox/", pages.inbox, name="inbox"),
    path("incidents/<int:pk>/", pages.incident_detail, name="incident"),
    path("inbox/alerts/<int:pk>/acknowledge/", pages.acknowledge, name="inbox_acknowledge"),
    path("inbox/alerts/<int:pk>/resolve/", pages.resolve, name="inbox_resolve"),
    path("inbox/alerts/<int:pk>/verdict/", pages.verdict, name="inbox_verdict"),
    path("inbox/alerts/<int:pk>/new-normal/", pages.new_normal, name="inbox_new_normal"),
    path("inbox/alerts/<int:pk>/mute/", pages.mute, name="inbox_mute"),
    path("inbox/incidents/<int:pk>/acknowledge/", pages.incident_acknowledge, name="inbox_incident_acknowledge"),
    path("inbox/incidents/<int:pk>/verdict/", pages.incident_verdict, name="inbox_incident_verdict"),
    path("inbox/incidents/<int:pk>/mute/", pages.incident_mute, name="inbox_incident_mute"),
]
