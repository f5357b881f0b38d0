"""Websocket routes: live updates of one run and of one project (opsconsole/consumers.py, opsconsole/live.py)."""
from django.urls import path

from opsconsole.consumers import ProjectConsumer, RunConsumer

websocket_urlpatterns = [
    # Run ids may contain "/", as in the HTTP routes (opsconsole/urls.py).
    path("ws/runs/<path:run_id>/", RunConsumer.as_asgi(), name="ws-run"),
    path("ws/projects/<slug:slug>/", ProjectConsumer.as_asgi(), name="ws-project"),
]
