from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.decorators.common import no_append_slash
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import SimpleRouter

from alerts.alert_views import AlertListView
from alerts import triage_views
from alerts.views import RuleViewSet

from ingest import views as ingest_views
from ingest.alertmanager import AlertmanagerView
from opsconsole.chart_api import SeriesChartView
from opsconsole.views import throttled_login

router = SimpleRouter()
router.register("rules", RuleViewSet, basename="rule")

api_v1 = [
    path("ingest", ingest_views.IngestView.as_view(), name="ingest"),
    path("alertmanager", AlertmanagerView.as_view(), name="alertmanager"),
    path("runs/", ingest_views.RunListView.as_view(), name="runs"),
    # The points route comes first: run ids may contain "/".
    path("runs/<path:run_id>/points/", ingest_views.PointsView.as_view(), name="run-points"),
    path("runs/<path:run_id>/events/", ingest_views.EventsView.as_view(), name="run-events"),
    path("runs/<path:run_id>/series/", SeriesChartView.as_view(), name="run-series"),
    path("runs/<path:run_id>/", ingest_views.RunDetailView.as_view(), name="run-detail"),
    path("alerts/", AlertListView.as_view(), name="alerts"),
    path("alerts/<int:pk>/", triage_views.AlertDetailView.as_view(), name="alert-detail"),
    path("alerts/<int:pk>/acknowledge/", triage_views.AcknowledgeView.as_view(), name="alert-acknowledge"),
    path("alerts/<int:pk>/resolve/", triage_views.ResolveView.as_view(), name="alert-resolve"),
    path("alerts/<int:pk>/verdict/", triage_views.VerdictView.as_view(), name="alert-verdict"),
    path("alerts/<int:pk>/mute/", triage_views.MuteView.as_view(), name="alert-mute"),
    path("inbox/", triage_views.InboxView.as_view(), name="inbox"),
    *router.urls,
]
# An API path missing its slash gets a JSON 404 naming the right one, never a redirect
# (a redirected POST loses its body; under DEBUG Django answers it with a 500).
for _route in api_v1:
    _route.callback = no_append_slash(_route.callback)

urlpatterns = [
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("admin/login/", throttled_login(admin.site.login)),  # before admin/: the admin's own login view, throttled
    path("admin/", admin.site.urls),
    path("accounts/login/", throttled_login(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("opsconsole.console_urls")),
]

handler400 = "opsconsole.views.bad_request"
handler403 = "opsconsole.views.permission_denied"
handler404 = "opsconsole.views.not_found"
handler500 = "opsconsole.views.server_error"
