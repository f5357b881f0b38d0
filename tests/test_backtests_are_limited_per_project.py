"""A project has at most BACKTEST_MAX_PER_PROJECT backtests queued or running: one more is a 429 that says so, other
projects are not held back, and a place comes back when one finishes (or is found lost)."""
import datetime as dt

import pytest
from django.utils import timezone

from alerts.models import BacktestJob, BacktestState
from alerts.tasks import run_backtest
from opsconsole.models import Membership, Role
from tests.backtest_support import draft, form, job_of, post
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_workers(monkeypatch):
    """Jobs are queued but no worker has taken them yet."""
    monkeypatch.setattr("alerts.tasks.queue_backtest", lambda job_id: True)


def test_the_third_backtest_of_a_project_is_a_429_while_two_wait(owner, runs, busy_workers, settings):
    settings.BACKTEST_MAX_PER_PROJECT = 2
    first, second = (job_of(owner, post(owner, draft())) for _ in range(2))
    assert first["state"] == second["state"] == "queued"
    third = post(owner, draft())
    assert third.status_code == 429
    assert third.json()["errors"][0]["message"] == (
        "project pretrain has 2 backtests queued or running, at most 2 at once: wait for one to finish")
    assert BacktestJob.objects.count() == 2

    run_backtest.delay(first["id"])  # a worker finishes one: its place is free again
    assert client_for(owner).get(first["url"]).json()["state"] == "done"
    assert post(owner, draft()).status_code == 202


def test_a_full_project_does_not_hold_back_another(owner, runs, busy_workers, settings, other_project):
    settings.BACKTEST_MAX_PER_PROJECT = 1
    assert post(owner, draft()).status_code == 202
    assert post(owner, draft()).status_code == 429
    Membership.objects.create(user=owner, project=other_project, role=Role.RULE_ADMIN)
    assert post(owner, draft(project="vision")).status_code == 202


def test_a_job_lost_on_the_way_to_a_worker_stops_holding_a_place(owner, runs, busy_workers, settings):
    settings.BACKTEST_MAX_PER_PROJECT = 1
    lost = job_of(owner, post(owner, draft()))
    BacktestJob.objects.filter(pk=lost["id"]).update(created_at=timezone.now() - dt.timedelta(hours=1))
    assert post(owner, draft()).status_code == 202
    lost = client_for(owner).get(lost["url"]).json()
    assert (lost["state"], lost["error"]) == ("failed", "lost: no worker finished it; start it again")


def test_the_rule_form_says_the_project_has_too_many_backtests(owner, runs, busy_workers, settings):
    settings.BACKTEST_MAX_PER_PROJECT = 1
    assert post(owner, draft()).status_code == 202
    response = client_for(owner).post("/rules/backtest/", form())
    assert response.status_code == 429
    html = response.content.decode()
    assert "project pretrain has 1 backtest queued or running, at most 1 at once" in html
    assert 'value="loss-band"' in html  # the form keeps what was typed
    assert BacktestJob.objects.filter(state=BacktestState.QUEUED).count() == 1
