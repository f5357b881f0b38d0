"""/metrics: what the console counts (ingest, evaluation, deliveries, throttling), the evaluation backlog read from the
database, open to Prometheus unless METRICS_TOKEN is set, and no project or run named unless a setting allows it."""
from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import BatchReceipt
from notifications import tasks
from notifications.models import Notification
from tests.metrics_support import samples, scrape, value
from tests.notify_support import fire, make_channel, spike_rule
from tests.test_settings_fail_loudly import start

TOKEN = "metrics-token-0123456789abcdef"


def batch(run_id="secret-run-7", steps=range(1, 4), batch_id=None):
    body = {"run": {"id": run_id}, "points": [{"step": s, "metric": "loss", "value": 1.0 / s} for s in steps]}
    if batch_id:
        body["batch_id"] = batch_id
    return body


def test_metrics_are_open_without_a_token_and_in_prometheus_format(client, db):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(response.content.decode())
    assert value(found, "warninglight_evaluation_backlog_batches") == 0
    assert ("warninglight_ingest_batches_total", (("result", "stored"),)) in found
    assert value(found, "warninglight_database_up") == 1 and value(found, "warninglight_metrics_store_up") == 1


def test_ingest_counts_batches_points_and_duplicates(client, sender):
    before = scrape(client)
    assert sender.post(batch(batch_id="b-1")).status_code == 202
    assert sender.post(batch(batch_id="b-1")).status_code == 200  # the same batch again: acknowledged, not stored
    after = scrape(client)

    def grew(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("warninglight_ingest_batches_total", result="stored") == 1
    assert grew("warninglight_ingest_batches_total", result="duplicate") == 1
    assert grew("warninglight_ingest_points_total") == 3
    assert grew("warninglight_evaluation_seconds_count") == 1  # evaluated inline (embedded/eager)
    assert grew("warninglight_evaluation_seconds_bucket", le="+Inf") == 1
    assert grew("warninglight_evaluation_seconds_sum") > 0


def test_the_backlog_and_its_oldest_batch_come_from_the_database(client, sender):
    sender.post(batch(run_id="a"))
    sender.post(batch(run_id="b"))
    assert value(scrape(client), "warninglight_evaluation_backlog_batches") == 0
    # What a stopped worker leaves: two batches stored and waiting, the older for 90 s.
    first, second = BatchReceipt.objects.order_by("pk")
    BatchReceipt.objects.filter(pk=first.pk).update(evaluated_at=None, received_at=timezone.now() - timedelta(seconds=90))
    BatchReceipt.objects.filter(pk=second.pk).update(evaluated_at=None, received_at=timezone.now() - timedelta(seconds=5))
    found = scrape(client)
    assert value(found, "warninglight_evaluation_backlog_batches") == 2
    assert 90 <= value(found, "warninglight_evaluation_oldest_unevaluated_seconds") < 120


def test_with_metrics_token_set_only_its_bearer_may_read(client, db, settings):
    settings.METRICS_TOKEN = TOKEN
    anonymous = client.get("/metrics")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    assert b"warninglight_" not in anonymous.content
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token-0123456789").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_no_project_or_run_is_named_unless_allowed(client, sender, settings, project):
    sender.post(batch(run_id="secret-run-7"))
    text = client.get("/metrics").content.decode()
    assert project.slug not in text and "secret-run-7" not in text and project.name not in text

    settings.METRICS_LABELS_WITH_PROJECTS = True
    before = value(scrape(client), "warninglight_ingest_points_total", project="pretrain")  # earlier tests' counts
    sender.post(batch(run_id="secret-run-7", steps=range(4, 6)))
    BatchReceipt.objects.update(evaluated_at=None)
    text = client.get("/metrics").content.decode()
    found = samples(text)
    assert value(found, "warninglight_ingest_points_total", project="pretrain") - before == 2
    assert value(found, "warninglight_evaluation_backlog_batches", project="pretrain") == 2
    assert "secret-run-7" not in text  # runs never: one series per run would grow without end

    # Turned off again: what was counted under the project's name is no longer shown.
    settings.METRICS_LABELS_WITH_PROJECTS = False
    assert project.slug not in client.get("/metrics").content.decode()


def test_deliveries_are_counted_by_status(client, project, sender, receiver, settings):
    spike_rule(project)
    make_channel(project, url=receiver.url)
    receiver.statuses = [503]
    before = scrape(client)
    fire(sender)  # the first try fails with 503: retried later
    Notification.objects.filter(state="queued").update(next_try_at=timezone.now() - timedelta(seconds=1))
    tasks.sweep_now()  # the retry goes through
    after = scrape(client)
    for status in ("retrying", "ok"):
        grew = (value(after, "warninglight_notification_deliveries_total", status=status, kind="webhook")
                - value(before, "warninglight_notification_deliveries_total", status=status, kind="webhook"))
        assert grew == 1, status


def test_throttled_requests_are_counted(client, sender, settings):
    settings.TOKEN_FAILURES_PER_TOKEN = 2
    before = value(scrape(client), "warninglight_throttled_requests_total", scope="token")
    statuses = [sender.post(batch(), token="wl_not-a-real-token").status_code for _ in range(4)]
    assert statuses == [401, 401, 429, 429]
    assert value(scrape(client), "warninglight_throttled_requests_total", scope="token") - before == 2


@pytest.mark.parametrize("name, raw", [("METRICS_TOKEN", "short"), ("METRICS_TOKEN", "with space 0123456789"),
                                       ("METRICS_LABELS_WITH_PROJECTS", "maybe"), ("ACCESS_LOG", "loud")])
def test_a_bad_setting_stops_the_start(tmp_path, name, raw):
    result = start({name: raw}, tmp_path)
    assert result.returncode != 0 and name in result.stderr


def test_good_settings_start(tmp_path):
    result = start({"METRICS_TOKEN": TOKEN, "METRICS_LABELS_WITH_PROJECTS": "1", "ACCESS_LOG": "0"}, tmp_path)
    assert result.returncode == 0, result.stderr
