"""Evaluation never waits on a delivery: with one project's two channels trickling their answers (a byte every 2 s)
on real Celery workers, another project's NaN alert fires within 2 s of its ingest answer, as the deployment runs
them (docker-compose.yml): one worker on the default queue, one on the notifications queue."""
import pytest
from django.utils import timezone

from alerts.models import Alert
from notifications.models import Notification
from tests.factories import make_rule
from tests.notify_support import make_channel
from tests.trickle_support import TricklingReceiver
from tests.worker_support import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

# Loopback receivers are a site's own network to allow once channels are refused private destinations.
WORKER_ENV = {"NOTIFY_ALLOWED_NETWORKS": "127.0.0.0/8"}


def nan_rule(project):
    return make_rule(project, "loss-nonfinite", kind="nonfinite", scope={"metrics": ["loss"]},
                     persistence={"points": 1, "resolve_points": 3})


def nan_loss(run_id, step=10):
    return {"run": {"id": run_id}, "points": [{"step": step, "metric": "loss", "value": "NaN"}]}


def test_another_projects_nan_alert_fires_while_two_channels_trickle(celery_worker, sender, project, other_project,
                                                                      other_token):
    nan_rule(project)
    nan_rule(other_project)
    slow = [TricklingReceiver(interval=2.0), TricklingReceiver(interval=2.0)]
    try:
        for i, receiver in enumerate(slow):
            make_channel(project, name=f"slow-{i}", url=receiver.url)
        with celery_worker(args=("-Q", "celery"), **WORKER_ENV) as evaluating, \
                celery_worker(pool="prefork", args=("-Q", "notifications", "-c", "2"), **WORKER_ENV) as delivering:
            for run_id in ("a-1", "a-2"):  # two incidents, each to both channels: four messages
                assert sender.post(nan_loss(run_id)).status_code == 202
            assert wait_until(lambda: Notification.objects.count() == 4, timeout=60), evaluating.output()[-3000:]
            assert wait_until(lambda: any(r.in_flight() for r in slow), timeout=60), delivering.output()[-3000:]
            # Both channels trickling, where deliveries have processes enough (checked below, once B has fired).
            wait_until(lambda: all(r.in_flight() for r in slow), timeout=20)

            response = sender.post(nan_loss("b-1"), token=other_token)
            answered = timezone.now()
            assert response.status_code == 202
            fired = lambda: Alert.objects.filter(run__project=other_project).exists()
            assert wait_until(fired, timeout=30, interval=0.05), (
                f"project B's alert never fired\n{evaluating.output()[-3000:]}")
            delay = (Alert.objects.get(run__project=other_project).fired_at - answered).total_seconds()
            # Project A's messages were still on their way all along.
            still_trickling = sum(r.in_flight() for r in slow)
            assert delay < 2.0, f"project B's NaN alert fired {delay:.1f} s after its ingest answer"
            assert still_trickling == 2
            assert Alert.objects.filter(run__project=project).count() == 2
    finally:
        for receiver in slow:
            receiver.close()
