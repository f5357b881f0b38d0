"""The rule form's Backtest button: the form's rule over stored runs, shown under the form, nothing saved."""
import pytest

from alerts.models import Alert, Rule, RuleRevision
from tests.factories import OWNER, client_for, make_rule

pytestmark = pytest.mark.django_db


def form(**changes):
    fields = {"name": "loss-band", "project": "pretrain", "kind": "band", "description": "", "enabled": "on",
              "owner": OWNER, "scope": '{"metrics": ["loss"]}', "persistence": '{"points": 3, "resolve_points": 10}',
              "diagnostic_url": "https://runbooks.example/loss", "permitted_response": "notify",
              "params": '{"direction": "above", "width": 6.0}', "backtest_runs": ""}
    return {**fields, **changes}


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
