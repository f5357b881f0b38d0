"""The runs app's routes: the run read API (under /api/v1/) and the run pages (under /)."""
from django.urls import path

from runs import api, pages

api_urlpatterns = [
    path("runs/", api.RunListView.as_view(), name="runs"),
    # The sub-resource routes come first: run ids may contain "/".
    path("runs/<path:run_id>/points/", api.PointsView.as_view(), name="run-points"),
    path("runs/<path:run_id>/events/", api.EventsView.as_view(), name="run-events"),
    path("runs/<path:run_id>/series/", api.SeriesChartView.as_view(), name="run-series"),
    path("runs/<path:run_id>/", api.RunDetailView.as_view(), name="run-detail"),
]
page_urlpatterns = [
    path("", pages.runs, name="runs"),
    path("runs/<path:run_id>/", pages.run_detail, name="run"),
]
