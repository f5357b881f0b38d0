"""The exports app's routes: JSON Lines downloads of a run and of a project (API under /api/v1/)."""
from django.urls import path

from exports import api

api_urlpatterns = [
    # Before the runs app's routes (opsconsole/urls.py mounts exports first): run ids may contain "/".
    path("runs/<path:run_id>/export/", api.RunExportView.as_view(), name="run-export"),
    path("projects/<slug:slug>/export/", api.ProjectExportView.as_view(), name="project-export"),
]
page_urlpatterns = []
