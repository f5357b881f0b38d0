"""Grouping is idempotent and safe at once: alerts are put into incidents once, whoever groups them, however
many group the run at the same time (the run's row is the lock)."""
import threading

import pytest
from django.db import connection

from alerts.incident_actions import acknowledge_incident
from alerts.incidents import group_new_alerts
from alerts.models import AlertChange, Incident, IncidentChange
from ingest.models import Run
from tests.factories import make_alert, make_rule


def ten_alerts(project):
    rule = make_rule(project, kind="nonfinite")  # non-finite grad_norm, per component
    return [make_alert(rule, "run-a", f"layers.{i}", first_step=100) for i in range(10)]


@pytest.mark.django_db
def test_grouping_twice_changes_nothing_the_second_time(project):
    alerts = ten_alerts(project)
    run = Run.objects.get()
    [incident] = group_new_alerts(run)
    assert group_new_alerts(run) == []
    assert Incident.objects.count() == 1 and IncidentChange.objects.count() == 1
    assert set(incident.alerts.values_list("pk", flat=True)) == {a.pk for a in alerts}


def _at_once(n, work):
    start, errors = threading.Barrier(n), []

    def run():
        try:
            start.wait()
            work()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_eight_groupings_at_once_make_one_incident(project):
    alerts = ten_alerts(project)
    _at_once(8, lambda: group_new_alerts(Run.objects.get()))
    [incident] = Incident.objects.all()
    assert set(incident.alerts.values_list("pk", flat=True)) == {a.pk for a in alerts}
    assert list(IncidentChange.objects.values_list("kind", flat=True)) == ["opened"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_eight_people_acknowledging_one_incident_at_once_write_one_row_per_alert(project, owner):
    ten_alerts(project)
    [incident] = group_new_alerts(Run.objects.get())
    _at_once(8, lambda: acknowledge_incident(Incident.objects.get(pk=incident.pk), owner))
    assert AlertChange.objects.filter(kind="acknowledged").count() == 10
    assert IncidentChange.objects.filter(kind="acknowledged").count() == 1
    assert Incident.objects.get().state == "acknowledged"
