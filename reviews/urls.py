"""The reviews app's routes: reviews, the decision log and the chronicle (API under /api/v1/, pages under /)."""
from django.urls import path

from reviews import api, pages

api_urlpatterns = [
    # --- reviews and the decision log
    path("reviews/", api.ReviewListView.as_view(), name="reviews"),
    path("reviews/<int:pk>/", api.ReviewDetailView.as_view(), name="review-detail"),
    path("reviews/<int:pk>/steps/<int:number>/", api.ReviewStepView.as_view(), name="review-step"),
    path("reviews/<int:pk>/comparison/", api.ReviewComparisonView.as_view(), name="review-comparison"),
    path("reviews/<int:pk>/decision/", api.ReviewDecisionView.as_view(), name="review-decision"),
    path("review-schedules/", api.ReviewScheduleView.as_view(), name="review-schedules"),
    path("decisions/", api.LogEntryListView.as_view(), name="decisions"),
    path("decisions/<int:pk>/", api.LogEntryDetailView.as_view(), name="decision-detail"),

    # --- the chronicle and the postmortem
    # Before the runs app's routes (opsconsole/urls.py mounts reviews first): run ids may contain "/".
    path("runs/<path:run_id>/postmortem.md", api.PostmortemMarkdownView.as_view(), name="run-postmortem-md"),
    path("runs/<path:run_id>/postmortem.json", api.PostmortemJsonView.as_view(), name="run-postmortem-json"),
    path("runs/<path:run_id>/chronicle/", api.ChronicleView.as_view(), name="run-chronicle"),
]
page_urlpatterns = [
    # --- reviews and the decision log
    path("reviews/new/", pages.review_start, name="review-start"),
    path("reviews/schedule/", pages.review_schedule, name="review-schedule"),
    path("reviews/<int:pk>/", pages.review, name="review"),
    path("reviews/<int:pk>/steps/<int:number>/", pages.review_check, name="review-check"),
    path("reviews/<int:pk>/comparison/", pages.review_compare, name="review-compare"),
    path("reviews/<int:pk>/decision/", pages.review_decide, name="review-decide"),
    path("decisions/", pages.decision_log, name="decisions"),
    path("decisions/new/", pages.decision_write, name="decision-write"),

    # --- the chronicle and the postmortem
    path("runs/<path:run_id>/chronicle/", pages.run_chronicle, name="run-chronicle"),
    path("projects/<slug:slug>/interruptions/", pages.project_interruptions, name="project-interruptions"),
]
