"""The notifications app's routes: channels as API (under /api/v1/) and pages (under /)."""
from django.urls import path
from rest_framework.routers import SimpleRouter

from notifications import api, pages

router = SimpleRouter()
router.register("channels", api.ChannelViewSet, basename="channel")

api_urlpatterns = [*router.urls]
page_urlpatterns = [
    path("channels/", pages.channel_list, name="channels"),
    path("channels/new/", pages.channel_create, name="channel_new"),
    path("channels/<int:pk>/", pages.channel_detail, name="channel"),
    path("channels/<int:pk>/edit/", pages.channel_edit, name="channel_edit"),
    path("channels/<int:pk>/delete/", pages.channel_delete, name="channel_delete"),
    path("channels/<int:pk>/test/", pages.channel_test, name="channel_test"),
]
