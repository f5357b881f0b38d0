"""Retention: raw points older than a project's `retention_days` go; alerts, incidents, reviews and the log stay.

A project without a policy (or with empty keeps) keeps everything; a second pass deletes nothing more.
"""
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from alerts.models import Alert
from ingest.models import Series
from retention.models import ArchiveReason, RetentionPolicy, RunArchive
from retention.prune import prune
from tests.factories import client_for
from tests.retention_support import age, fired_alert, send_points, stored_points, stored_rollups

pytestmark = pytest.mark.django_db


def test_points_older_than_the_keep_go_and_the_rest_stays(project, sender, owner):
    old = send_points(sender, "old-run")
    fired_alert(old)
    age(old, 40)
    fresh = send_points(sender, "fresh-run")
    RetentionPolicy.objects.create(project=project, retention_days=30)

    counts = prune()

    assert counts["pretrain"]["blocks"] > 0
    assert stored_points(old) == 0 and stored_points(fresh) > 0
    # The run, its series, its alert and its rollups (the charts' wide zoom) stay.
    assert Series.objects.filter(run=old).exists() and stored_rollups(old) > 0
    assert Alert.objects.filter(run=old).count() == 1
    archive = RunArchive.objects.get(run=old)
    assert archive.reason == ArchiveReason.RETENTION
    assert not RunArchive.objects.filter(run=fresh).exists()
    page = client_for(owner).get("/runs/old-run/").content.decode()
    assert f"Archived on {archive.archived_at:%Y-%m-%d}: its points were deleted by retention" in page
    assert "Archived on" not in client_for(owner).get("/runs/fresh-run/").content.decode()


def test_a_second_pass_deletes_nothing_more(project, sender):
    run = send_points(sender, "old-run")
    age(run, 40)
    RetentionPolicy.objects.create(project=project, retention_days=30)
    assert prune()["pretrain"]["blocks"] > 0
    assert prune()["pretrain"]["blocks"] == 0


def test_without_a_policy_or_with_empty_keeps_nothing_goes(project, sender):
    run = send_points(sender, "old-run")
    age(run, 4000)
    assert prune() == {}
    RetentionPolicy.objects.create(project=project)
    prune()
    assert stored_points(run) > 0 and not RunArchive.objects.exists()


def test_rollups_and_resolved_alerts_go_after_their_own_longer_keeps(project, sender):
    run = send_points(sender, "old-run")
    alert = fired_alert(run)
    Alert.objects.filter(pk=alert.pk).update(state="resolved", resolved_at=timezone.now() - timedelta(days=250))
    age(run, 100)
    RetentionPolicy.objects.create(project=project, retention_days=30, rollup_retention_days=90, alert_retention_days=300)
    prune()
    assert stored_points(run) == 0 and stored_rollups(run) == 0
    assert Alert.objects.filter(pk=alert.pk).exists()  # resolved 250 days ago, inside the 300-day keep
    RetentionPolicy.objects.filter(project=project).update(alert_retention_days=200)
    prune()
    assert not Alert.objects.filter(pk=alert.pk).exists()


def test_a_keep_shorter_than_the_raw_points_is_refused(project):
    with pytest.raises(ValidationError) as caught:
        RetentionPolicy(project=project, retention_days=30, rollup_retention_days=7).full_clean()
    assert "rollup_retention_days" in caught.value.message_dict
