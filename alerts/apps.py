from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts and evaluation"

    def ready(self):
        # Ingest announces; alerts subscribes (ingest never imports alerts).
        from alerts.actions import actions_for_batch
        from alerts.starter import starter_pack_for_new_project
        from alerts.tasks import queue_stored_batch
        from ingest import signals

        signals.batch_stored.connect(queue_stored_batch, dispatch_uid="alerts.evaluate")
        signals.actions_requested.connect(actions_for_batch, dispatch_uid="alerts.actions")
        signals.project_set_up.connect(starter_pack_for_new_project, dispatch_uid="alerts.starter_pack")
