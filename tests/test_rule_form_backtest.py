"""The rule form's Backtest button: the form's rule over stored runs, shown under the form, nothing saved."""
import pytest

from alerts.models import Alert, BacktestJob, Rule, RuleRevision
from alerts.tasks import run_backtest
from tests.backtest_support import form
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


def rows(html):
    body = html.split('class="runs backtest-alerts"', 1)[1].split("</tbody>", 1)[0]
    return [[cell.split(">", 1)[1] for cell in row.split("</td>")[:4]] for row in body.split("<tr>")[2:]]


def test_backtesting_a_new_rule_shows_its_alerts_pages_and_saves_nothing(owner, runs):
    response = client_for(owner).post("/rules/backtest/", form())
    assert response.status_code == 200
    html = response.content.decode()
    assert [r[0].strip() for r in rows(html)] == ["spiky-a", "spiky-b"]
    assert "<strong>2</strong> alerts on\n        <strong>2</strong> of 3 runs" in html
    assert "<strong>2</strong> pages" in html and "no prediction" in html
    assert 'value="loss-band"' in html  # the form keeps what was typed, to edit and save
    assert 'action="/rules/new/"' in html
    assert (Rule.objects.count(), RuleRevision.objects.count(), Alert.objects.count()) == (0, 0, 0)


def test_backtesting_an_edit_judges_the_form_values_and_keeps_the_edit_page(owner, project, runs):
    rule = make_rule(project, kind="band", params={"direction": "above", "width": 1000.0})
    response = client_for(owner).post("/rules/backtest/", form(name=rule.name, editing=str(rule.pk), backtest_runs="spiky-a"))
    html = response.content.decode()
    assert [r[0].strip() for r in rows(html)] == ["spiky-a"]
    assert f'action="/rules/{rule.pk}/edit/"' in html
    rule.refresh_from_db()
    assert rule.params["width"] == 1000.0


def test_bad_fields_and_unknown_runs_are_shown_and_nothing_is_replayed(owner, runs):
    html = client_for(owner).post("/rules/backtest/", form(params='{"width": -1}')).content.decode()
    assert "Not backtested." in html and "backtest-result" not in html
    html = client_for(owner).post("/rules/backtest/", form(backtest_runs="nope")).content.decode()
    assert "no run nope in project pretrain" in html and "backtest-result" not in html


def test_a_viewer_has_no_rule_form_to_backtest_from(teammate, runs):
    assert client_for(teammate).post("/rules/backtest/", form()).status_code == 403


def test_a_backtest_not_done_yet_shows_its_state_and_the_page_that_will_show_its_result(owner, runs, monkeypatch):
    monkeypatch.setattr("alerts.tasks.queue_backtest", lambda job_id: True)  # the workers have not taken it yet
    html = client_for(owner).post("/rules/backtest/", form()).content.decode()
    job = BacktestJob.objects.get()
    assert "Backtest queued, waiting for a worker" in html and "backtest-summary" not in html
    assert f'data-poll="/rules/backtests/{job.pk}/"' in html and "js/backtest.js" in html
    run_backtest.delay(job.pk)
    page = client_for(owner).get(f"/rules/backtests/{job.pk}/").content.decode()
    assert "data-poll" not in page and "<strong>2</strong> alerts on" in page
