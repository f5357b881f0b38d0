from django.urls import path

from opsconsole import views

app_name = "console"
urlpatterns = [
    path("", views.runs, name="runs"),
    path("runbooks/<slug:name>/", views.runbook, name="runbook"),
]
