"""The project's routes. Each app routes its own API (`api_urlpatterns`, under /api/v1/, namespace "api") and
pages (`page_urlpatterns`, under /, namespace "console") in its urls.py; this module only mounts them."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.decorators.common import no_append_slash
from drf_spectacular.views import SpectacularAPIView

from alerts import urls as alerts_urls
from audit import urls as audit_urls
from exports import urls as exports_urls
from ingest import urls as ingest_urls
from notifications import urls as notifications_urls
from opsconsole.pages import throttled_login
from retention import urls as retention_urls
from reviews import urls as reviews_urls
from runs import urls as runs_urls

# reviews and exports before runs: their run sub-resources (…/postmortem.md, …/export/) sit under runs/.
APPS = (ingest_urls, reviews_urls, exports_urls, runs_urls, alerts_urls, audit_urls, notifications_urls, retention_urls)

api_v1 = [route for app in APPS for route in app.api_urlpatterns]
# An API path missing its slash gets a JSON 404 naming the right one, never a redirect
# (a redirected POST loses its body; under DEBUG Django answers it with a 500).
for _route in api_v1:
    _route.callback = no_append_slash(_route.callback)

pages = [route for app in APPS for route in app.page_urlpatterns]

urlpatterns = [
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("admin/login/", throttled_login(admin.site.login)),  # before admin/: the admin's own login view, throttled
    path("admin/", admin.site.urls),
    path("accounts/login/", throttled_login(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include((pages, "console"), namespace="console")),
]

handler400 = "opsconsole.pages.bad_request"
handler403 = "opsconsole.pages.permission_denied"
handler404 = "opsconsole.pages.not_found"
handler500 = "opsconsole.pages.server_error"
