"""The rule audit report is found by following links: the nav's Reports lists the caller's projects, each linked to
its report; the rules list and a rule's page link to the rule's row in it; the page's address with format=csv
(as docs/alerting.md writes it) answers CSV."""
import re

from tests.factories import client_for, make_rule


def links(html):
    return re.findall(r'href="([^"]+)"', html)


def test_the_navs_reports_lists_the_callers_projects_each_linked_to_its_rule_report(project, other_project, owner):
    client = client_for(owner)
    nav = client.get("/rules/").content.decode()
    reports = next(h for h in re.findall(r'<a href="([^"]+)">Reports</a>', nav))
    page = client.get(reports)
    assert page.status_code == 200
    html = page.content.decode()
    assert f"/reports/rules/?project={project.slug}" in links(html)
    assert f"/reports/rules/?project={other_project.slug}" not in " ".join(links(html))  # not a member there
    assert "SLUG" not in html
    assert client.get(f"/reports/rules/?project={project.slug}").status_code == 200


def test_the_rules_list_and_a_rule_page_link_to_the_rules_row_in_the_report(project, owner):
    rule = make_rule(project, "loss-spike")
    client = client_for(owner)
    anchored = f"/reports/rules/?project={project.slug}#rule-{rule.pk}"
    assert anchored in links(client.get("/rules/").content.decode())
    assert anchored in links(client.get(f"/rules/{rule.pk}/").content.decode())
    report = client.get(f"/reports/rules/?project={project.slug}").content.decode()
    assert re.search(rf'<tr data-rule="loss-spike" id="rule-{rule.pk}"', report)


def test_the_report_page_with_format_csv_answers_csv(project, owner):
    make_rule(project, "loss-spike")
    client = client_for(owner)
    answer = client.get(f"/reports/rules/?project={project.slug}&format=csv", follow=True)
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/csv")
    lines = answer.content.decode().splitlines()
    assert lines[0].startswith("rule,owner,kind")
    assert lines[1].startswith("loss-spike,")
    as_json = client.get(f"/reports/rules/?project={project.slug}&format=json", follow=True)
    assert as_json["Content-Type"].startswith("application/json")
    assert [r["rule"] for r in as_json.json()["rules"]] == ["loss-spike"]
