"""Each rule's record so far on the rules pages: fire count, false-alarm rate, open alerts, mutes, recent alerts."""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts import models as alert_models
from alerts.describe import false_alarm_rate
from ingest.models import Run
from tests.factories import client_for, make_alert, make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def rule(project, owner):
    return make_rule(project, user=owner)


@pytest.fixture
def run(project):
    return Run.objects.create(project=project, run_id="pretrain/run-1")


def test_fire_count_and_false_alarm_rate_on_the_list_and_the_detail(owner, project, rule, run):
    make_alert(rule, run, "blocks.0", first_step=0, state="resolved", verdict="false_alarm")
    make_alert(rule, run, "blocks.1", first_step=10, state="resolved", verdict="actionable")
    make_alert(rule, run, "blocks.2", first_step=20, state="resolved")
    make_alert(rule, run, "blocks.3", first_step=30, state="firing")
    make_rule(project, name="quiet-rule")
    client = client_for(owner)

    listing = client.get("/rules/").content.decode()
    row = listing[listing.index(">loss-spike<"):listing.index(">quiet-rule<")]
    assert '<td class="num">4</td>' in row and "50% (1 of 2)" in row
    quiet = listing[listing.index(">quiet-rule<"):listing.index("</tbody>")]
    assert '<td class="num">0</td>' in quiet and '<td class="num">—</td>' in quiet and "%" not in quiet

    detail = client.get(f"/rules/{rule.pk}/").content.decode()
    assert 'id="rule-fired">4<' in detail
    assert 'id="rule-false-alarms">50% (1 of 2)<' in detail
    assert 'id="rule-open">1<' in detail  # the one still firing
    assert "pretrain/run-1" in detail and ">blocks.3<" in detail and "False alarm" in detail


def test_the_false_alarm_rate_in_words():
    assert false_alarm_rate(1, 2) == "50% (1 of 2)"
    assert false_alarm_rate(1, 3) == "33% (1 of 3)"
    assert false_alarm_rate(0, 4) == "0% (0 of 4)"
    assert false_alarm_rate(0, 0) == "—"


def test_the_detail_lists_the_20_most_recent_alerts_linked_to_their_run(owner, rule, run):
    for n in range(25):
        make_alert(rule, run, f"blocks.{n}", first_step=10 * n, state="resolved")
    html = client_for(owner).get(f"/rules/{rule.pk}/").content.decode()
    table = html[html.index('id="rule-alerts"'):html.index("</table>", html.index('id="rule-alerts"'))]
    assert table.count("<tr>") == 1 + 20
    assert ">blocks.24<" in table and ">blocks.5<" in table and ">blocks.4<" not in table
    assert 'href="/runs/pretrain/run-1/"' in table
    assert 'id="rule-fired">25<' in html


def test_mutes_are_counted(owner, project, rule):
    now = timezone.now()
    for _ in range(2):
        alert_models.Mute.objects.create(project=project, scope="rule", rule=rule, reason="known flaky loader",
                                         expires_at=now + timedelta(hours=1), created_at=now, created_by=owner)
    client = client_for(owner)
    assert 'id="rule-mutes">2<' in client.get(f"/rules/{rule.pk}/").content.decode()
    assert "<th class=\"num\">Mutes</th>" in client.get("/rules/").content.decode()
