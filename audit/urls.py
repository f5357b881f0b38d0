"""The audit app's routes: the rule report (API under /api/v1/, pages under /), sent reports, fatigue."""
from django.urls import path

from audit import api, pages

api_urlpatterns = [
    path("reports/rules/", api.RuleReportView.as_view(), name="reports-rules"),
]
page_urlpatterns = [
    path("reports/", pages.reports_index, name="reports"),
    path("reports/rules/", pages.rule_report, name="reports-rules"),
    path("reports/rules/print/", pages.rule_report_print, name="reports-rules-print"),
    path("reports/sent/", pages.sent_reports, name="reports-sent"),
    path("reports/sent/<int:pk>/", pages.sent_report, name="reports-sent-one"),
    path("reports/fatigue/", pages.fatigue_page, name="reports-fatigue"),
]
