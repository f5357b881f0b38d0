"""The decision log is append-only below the application: the database itself refuses UPDATE and DELETE.

Run on PostgreSQL in CI and again on the embedded SQLite (both_databases): each has its own triggers
(reviews/migrations/0002). A correction is a new entry naming the one it corrects; both stay.
"""
import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from ingest.models import Run
from reviews.models import LogEntry
from tests.factories import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


@pytest.fixture
def entry(project):
    run = Run.objects.create(project=project, run_id="r-log", max_step=100)
    return LogEntry.objects.create(project=project, run=run, observation="loss spike at 90", explanations=["bad batch"],
                                   owner="Pretrain on-call", at=timezone.now(), step=100)


def refused(sql, params):
    with pytest.raises(DatabaseError) as caught:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    return str(caught.value)


def test_the_database_refuses_to_update_an_entry_even_in_raw_sql(entry):
    message = refused("UPDATE reviews_logentry SET observation = %s WHERE id = %s", ["rewritten", entry.pk])
    assert "append-only" in message
    with pytest.raises(DatabaseError):
        with transaction.atomic():
            LogEntry.objects.filter(pk=entry.pk).update(owner="someone else")
    assert LogEntry.objects.get(pk=entry.pk).observation == "loss spike at 90"


def test_the_database_refuses_to_delete_an_entry_even_in_raw_sql(entry):
    assert "append-only" in refused("DELETE FROM reviews_logentry WHERE id = %s", [entry.pk])
    with pytest.raises(DatabaseError):
        with transaction.atomic():
            entry.delete()
    assert LogEntry.objects.filter(pk=entry.pk).exists()


def test_a_correction_is_a_new_entry_and_the_page_shows_both(entry, oncall):
    client = client_for(oncall)
    answer = client.post("/api/v1/decisions/", {
        "run": "r-log", "observation": "the spike was at step 95, not 90", "explanations": ["misread the chart"],
        "corrects": entry.pk,
    }, content_type="application/json")
    assert answer.status_code == 201, answer.content
    correction = answer.json()
    assert correction["corrects"] == entry.pk
    assert client.get(f"/api/v1/decisions/{entry.pk}/").json()["corrected_by"] == [correction["id"]]
    page = client.get("/decisions/?run=r-log").content.decode()
    assert "loss spike at 90" in page and "the spike was at step 95, not 90" in page
    assert f"Corrected by <a href=\"#entry-{correction['id']}\">entry #{correction['id']}</a>" in page
    assert f"Corrects <a href=\"#entry-{entry.pk}\">entry #{entry.pk}</a>" in page


def test_the_api_offers_no_way_to_change_or_remove_an_entry(entry, owner):
    client = client_for(owner)
    for method in ("put", "patch", "delete"):
        answer = getattr(client, method)(f"/api/v1/decisions/{entry.pk}/", {"observation": "x"}, content_type="application/json")
        assert answer.status_code == 405
    assert LogEntry.objects.get(pk=entry.pk).observation == "loss spike at 90"
