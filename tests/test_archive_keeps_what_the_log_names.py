"""A run the append-only decision log names is archived, not deleted: its points go; its identity, alerts,
incidents, reviews and log entries stay, and its page says it was archived, when and by whom."""
import pytest

from alerts.models import Alert
from ingest.models import Run
from retention.models import ArchiveReason, RunArchive
from retention.purge import delete_run
from reviews.models import LogEntry
from tests.factories import client_for
from tests.retention_support import fired_alert, log_entry, send_points, stored_points, stored_rollups

pytestmark = pytest.mark.django_db


def test_deleting_a_run_the_log_is_written_on_archives_it(sender, owner):
    run = send_points(sender, "logged-run")
    alert = fired_alert(run)
    entry = log_entry(run, links={"alerts": [alert.pk]})

    answer = client_for(owner).delete("/api/v1/runs/logged-run/")

    assert answer.status_code == 202, answer.content
    assert answer.json()["archived"] is True
    assert stored_points(run) == 0 and stored_rollups(run) == 0
    run = Run.objects.get(run_id="logged-run")  # identity stays
    assert Alert.objects.filter(pk=alert.pk).exists() and LogEntry.objects.filter(pk=entry.pk).exists()
    archive = RunArchive.objects.get(run=run)
    assert archive.reason == ArchiveReason.DELETED and archive.by == owner
    page = client_for(owner).get("/runs/logged-run/").content.decode()
    assert f"Archived on {archive.archived_at:%Y-%m-%d}: its points were deleted by olivia" in page
    assert "loss spike at 90" in client_for(owner).get("/decisions/?run=logged-run").content.decode()


def test_a_run_another_entry_links_to_is_archived_too(project, sender):
    linked = send_points(sender, "linked-run")
    other = send_points(sender, "other-run")
    log_entry(other, links={"runs": ["linked-run"]})
    assert delete_run(linked).archived
    assert Run.objects.filter(run_id="linked-run").exists()


def test_archiving_twice_keeps_the_first_date_and_a_run_nobody_names_is_deleted(project, sender):
    run = send_points(sender, "logged-run")
    log_entry(run)
    first = delete_run(run)
    archived_at = RunArchive.objects.get(run=run).archived_at
    assert first.archived and delete_run(run).archived
    assert RunArchive.objects.get(run=run).archived_at == archived_at

    plain = send_points(sender, "plain-run")
    fired_alert(plain)
    assert not delete_run(plain).archived
    assert not Run.objects.filter(run_id="plain-run").exists() and not Alert.objects.filter(run_id=plain.pk).exists()
