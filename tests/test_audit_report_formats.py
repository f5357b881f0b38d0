"""The rule report's page, printable page, JSON and CSV carry the same numbers; members read it, others get 404."""
import csv
import io
import re

import pytest

from alerts.models import ChangeKind
from tests.audit_support import PERIOD, change, fire, mute
from tests.factories import client_for, make_rule

QUERY = {"project": "pretrain", "since": PERIOD.since.isoformat(), "until": PERIOD.until.isoformat()}
FIGURES = ["alerts_per_run", "share_triaged", "false_alarm_rate", "actionable_rate", "median_ack_seconds",
           "median_resolve_seconds", "muted_hours", "muted_share"]


@pytest.fixture
def history(project, owner):
    spike, grad = make_rule(project, "loss-spike"), make_rule(project, "grad-high", kind="threshold")
    a = fire(spike, 1, resolved=4)
    b = fire(spike, 2, run="run-b", resolved=9)
    change(a, ChangeKind.ACKNOWLEDGED, 1.25, by=owner)
    change(b, ChangeKind.ACKNOWLEDGED, 2.6, by=owner)
    change(a, ChangeKind.VERDICT, 5, by=owner, verdict="false_alarm")
    change(b, ChangeKind.VERDICT, 10, by=owner, verdict="actionable")
    fire(grad, 3)
    fire(grad, 4, run="run-c", resolved=7)
    mute(spike, 0, 3)
    mute(grad, 3.5, 50, ended=20)
    return spike, grad


def page_figures(html: str) -> dict:
    rows = {}
    for name, body in re.findall(r'<tr data-rule="([^"]+)"[^>]*>(.*?)</tr>', html, re.S):
        rows[name] = {k: v for k, v in re.findall(r'data-figure="([a-z_]+)" data-value="([^"]*)"', body)}
        rows[name].update(re.findall(r'data-figure="(fires|incidents|mutes)">(\d+)<', body))
    return rows


def as_number(text):
    return None if text in ("", None) else float(text)


def test_csv_and_json_carry_the_pages_numbers(history, owner):
    client = client_for(owner)
    page = client.get("/reports/rules/", QUERY)
    assert page.status_code == 200
    shown = page_figures(page.content.decode())
    data = client.get("/api/v1/reports/rules/", QUERY).json()
    answer = client.get("/api/v1/reports/rules/", {**QUERY, "format": "csv"})
    assert answer["Content-Type"].startswith("text/csv")
    assert answer["Content-Disposition"] == 'attachment; filename="rule-report-pretrain.csv"'
    lines = {row["rule"]: row for row in csv.DictReader(io.StringIO(answer.content.decode()))}
    assert sorted(shown) == sorted(lines) == sorted(r["rule"] for r in data["rules"]) == ["grad-high", "loss-spike"]
    for row in data["rules"]:
        for figure in FIGURES:
            assert as_number(shown[row["rule"]][figure]) == as_number(lines[row["rule"]][figure]) == row[figure], figure
        for figure in ("fires", "incidents", "mutes"):
            assert int(shown[row["rule"]][figure]) == int(lines[row["rule"]][figure]) == row[figure], figure
        assert lines[row["rule"]]["flags"] == " ".join(f["flag"] for f in row["flags"])
    spike = next(r for r in data["rules"] if r["rule"] == "loss-spike")
    assert (spike["fires"], spike["false_alarm_rate"], spike["median_ack_seconds"]) == (2, 0.5, (900 + 2160) / 2)


def test_an_owner_a_spreadsheet_would_run_is_kept_inert_in_the_csv(history, owner):
    from alerts.models import Rule

    Rule.objects.filter(name="grad-high").update(owner='=HYPERLINK("http://evil.example")')
    answer = client_for(owner).get("/api/v1/reports/rules/", {**QUERY, "format": "csv"})
    lines = {row["rule"]: row for row in csv.DictReader(io.StringIO(answer.content.decode()))}
    assert lines["grad-high"]["owner"] == "'=HYPERLINK(\"http://evil.example\")"


def test_printable_page_has_the_table_and_no_navigation(history, owner):
    for url, query in (("/reports/rules/print/", QUERY), ("/reports/rules/", {**QUERY, "print": "1"})):
        html = client_for(owner).get(url, query).content.decode()
        assert 'id="report-table"' in html and "audit-print.css" in html and "<nav>" not in html
        assert page_figures(html) == page_figures(client_for(owner).get("/reports/rules/", QUERY).content.decode())


@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_members_read_the_report(history, request, who):
    client = client_for(request.getfixturevalue(who))
    assert client.get("/reports/rules/", QUERY).status_code == 200
    assert client.get("/api/v1/reports/rules/", QUERY).status_code == 200
    assert client.get("/api/v1/reports/rules/", {**QUERY, "format": "csv"}).status_code == 200


def test_an_outsider_gets_404(history, outsider):
    client = client_for(outsider)
    assert client.get("/reports/rules/", QUERY).status_code == 404
    assert client.get("/reports/rules/print/", QUERY).status_code == 404
    assert client.get("/api/v1/reports/rules/", QUERY).status_code == 404
    assert client.get("/api/v1/reports/rules/", {**QUERY, "format": "csv"}).status_code == 404


@pytest.mark.parametrize(("query", "field"), [
    ({"format": "xml"}, "format"), ({"since": "yesterday"}, "since"), ({"until": "2026-13-01"}, "until"),
    ({"project": ""}, "project"),
])
def test_bad_query_is_a_json_400_naming_the_field(history, owner, query, field):
    answer = client_for(owner).get("/api/v1/reports/rules/", {**QUERY, **query})
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("application/json")
    assert [e["path"] for e in answer.json()["errors"]] == [field]
    assert client_for(owner).get("/reports/rules/", {**QUERY, **query}).status_code == 400


def test_since_at_or_after_until_is_an_empty_period(history, owner):
    for until in (PERIOD.since.isoformat(), "2000-01-01T00:00:00Z"):
        data = client_for(owner).get("/api/v1/reports/rules/", {**QUERY, "until": until}).json()
        assert [(r["fires"], r["false_alarm_rate"], r["muted_hours"], r["muted_share"]) for r in data["rules"]] == [
            (0, None, 0, None), (0, None, 0, None)]


def test_the_earliest_dates_are_a_report_not_a_crash(history, owner):
    answer = client_for(owner).get("/api/v1/reports/rules/", {"project": "pretrain", "until": "0001-01-02T00:00:00Z"})
    assert answer.status_code == 200
    assert client_for(owner).get("/reports/fatigue/", {"project": "pretrain", "until": "0001-01-02T00:00:00Z"}).status_code == 200


def test_the_owner_parameter_narrows_every_format(history, owner, project):
    from alerts.models import Rule

    Rule.objects.filter(name="grad-high").update(owner="Grad team <grad@example.org>")
    query = {**QUERY, "owner": "Grad team <grad@example.org>"}
    client = client_for(owner)
    assert [r["rule"] for r in client.get("/api/v1/reports/rules/", query).json()["rules"]] == ["grad-high"]
    assert list(page_figures(client.get("/reports/rules/", query).content.decode())) == ["grad-high"]
