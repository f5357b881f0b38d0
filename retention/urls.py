"""The retention app's routes: a project's delete (API under /api/v1/); no pages (the run page shows an archive)."""
from django.urls import path

from retention import api

api_urlpatterns = [
    path("projects/<slug:slug>/", api.ProjectView.as_view(), name="project"),
]
page_urlpatterns = []
