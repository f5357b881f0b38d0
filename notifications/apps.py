from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notification channels: webhooks, Slack, Alertmanager, email"

    def ready(self):
        # Alerts announce; notifications subscribe (alerts never import notifications).
        from alerts import signals
        from notifications import routing

        signals.incident_changed.connect(routing.incident_changed, dispatch_uid="notifications.incident_changed")
