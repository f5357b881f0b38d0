"""Alert fatigue per day: alerts, incidents, pages, actionable share, time to acknowledge; the rules to fix first."""
import json
import re

from alerts.fatigue import rules_to_fix_first
from alerts.models import ChangeKind, Rule
from audit.fatigue import REFERENCE_FALSE, REFERENCE_NO_ACTION, fatigue
from tests.audit_support import PERIOD, change, fire, incident, owned_rule
from tests.factories import client_for, make_rule


def build(project, owner):
    pager = make_rule(project, "loss-spike", response="notify")
    reviewer = make_rule(project, "grad-high", kind="threshold", response="review")
    watcher = owned_rule(project, "missing-data", "Data team <data@example.org>", kind="absence", response="observe")
    a = fire(pager, 1, verdict="false_alarm")
    b = fire(pager, 2, run="run-b", verdict="actionable")
    change(a, ChangeKind.ACKNOWLEDGED, 1.5, by=owner)  # 30 min
    change(b, ChangeKind.ACKNOWLEDGED, 2.25, by=owner)  # 15 min
    fire(reviewer, 25, verdict="false_alarm")  # day 2
    fire(reviewer, 26, run="run-b", verdict="false_alarm")
    fire(watcher, 27, verdict="false_alarm")  # not a page
    incident("run-a", project, 1)
    incident("run-b", project, 26)
    return pager, reviewer, watcher


def test_per_day_figures(project, owner):
    build(project, owner)
    figures = fatigue(project, PERIOD)
    assert figures["days"] == ["2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05", "2026-03-06", "2026-03-07",
                               "2026-03-08"]
    assert figures["alerts"] == [2, 3, 0, 0, 0, 0, 0]
    assert figures["pages"] == [2, 2, 0, 0, 0, 0, 0]
    assert figures["incidents"] == [1, 1, 0, 0, 0, 0, 0]
    assert figures["actionable_share"] == [0.5, 0.0, None, None, None, None, None]
    assert figures["median_ack_seconds"] == [(1800 + 900) / 2, None, None, None, None, None, None]
    assert {r["rule"]: r["alerts"][:2] for r in figures["rules"]} == {
        "grad-high": [0, 2], "loss-spike": [2, 0], "missing-data": [0, 1]}
    assert (figures["reference_no_action"], figures["reference_false"]) == ([0.85, 0.99], 0.888)
    assert (REFERENCE_NO_ACTION, REFERENCE_FALSE) == ((0.85, 0.99), 0.888)


def test_per_owner(project, owner):
    build(project, owner)
    figures = fatigue(project, PERIOD, owner="Data team <data@example.org>")
    assert (figures["alerts"][:2], figures["pages"][:2]) == ([0, 1], [0, 0])
    assert [r["rule"] for r in figures["rules"]] == ["missing-data"]


def test_rules_to_fix_first_by_pages_judged_false(project, owner):
    build(project, owner)
    ranked = rules_to_fix_first(list(Rule.objects.filter(project=project)))
    # grad-high: 2 false pages; loss-spike: 1; missing-data observes (no pages).
    assert [(r.name, n) for r, n in ranked] == [("grad-high", 2), ("loss-spike", 1)]
    assert fatigue(project, PERIOD)["fix_first"][0] == {"rule": "grad-high", "rule_id": ranked[0][0].pk, "false_pages": 2}


def test_the_fatigue_page_and_the_rules_list_show_them(project, owner, outsider):
    build(project, owner)
    page = client_for(owner).get("/reports/fatigue/", {"project": "pretrain", "since": PERIOD.since.isoformat(),
                                                        "until": PERIOD.until.isoformat()})
    html = page.content.decode()
    data = json.loads(re.search(r'<script id="fatigue-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert data["alerts"][:2] == [2, 3]
    assert re.findall(r'<li data-rule="([^"]+)">', html) == ["grad-high", "loss-spike"]
    assert "vendor/plotly/plotly-basic.min.js" in html and "js/fatigue.js" in html
    rules = client_for(owner).get("/rules/").content.decode()
    section = rules.split('id="fix-first"')[1].split("</section>")[0]
    assert re.findall(r'data-rule="([^"]+)"', section) == ["grad-high", "loss-spike"]
    assert re.findall(r'class="fix-first-count">(\d+)<', section) == ["2", "1"]
    assert client_for(outsider).get("/reports/fatigue/", {"project": "pretrain"}).status_code == 404
