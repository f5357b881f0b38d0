"""Ingest's routes: the contract's write endpoints (mounted under /api/v1/ by opsconsole/urls.py)."""
from django.urls import path

from ingest import api

api_urlpatterns = [
    path("ingest", api.IngestView.as_view(), name="ingest"),
    path("alertmanager", api.AlertmanagerView.as_view(), name="alertmanager"),
]
page_urlpatterns = []
