from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    verbose_name = "Run reviews, the decision log and the run's chronicle"

    def ready(self):
        # Alerts announce; reviews subscribe (alerts never import reviews).
        from alerts import signals
        from reviews import signals as review_signals
        from reviews import tasks, triggers

        signals.alerts_fired.connect(triggers.reviews_for_fired_alerts, dispatch_uid="reviews.alerts_fired")
        signals.batch_evaluated.connect(triggers.reviews_due_after_batch, dispatch_uid="reviews.batch_evaluated")
        # The domain announces a review opened; the task layer fills it (triggers never import tasks).
        review_signals.review_opened.connect(tasks.review_opened, dispatch_uid="reviews.review_opened")
