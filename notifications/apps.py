from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notification channels: webhooks, Slack, Alertmanager, email"

    def ready(self):
        # Alerts announce; notifications subscribe (alerts never import notifications).
        from alerts import signals
        from notifications import tasks

        # The receiver runs inside evaluation's transaction: one read, the routing and queueing after commit.
        signals.incident_changed.connect(tasks.incident_changed, dispatch_uid="notifications.incident_changed")
