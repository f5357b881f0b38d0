from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    verbose_name = "Run reviews, the decision log and the run's chronicle"

    def ready(self):
        # Alerts announce; reviews subscribe (alerts never import reviews).
        from alerts import signals
        from reviews import triggers

        signals.alert_fired.connect(triggers.review_for_fired_alert, dispatch_uid="reviews.alert_fired")
        signals.batch_evaluated.connect(triggers.reviews_due_after_batch, dispatch_uid="reviews.batch_evaluated")
