"""The rule report's owner_gone flag tells a project's members nothing about accounts outside the project.

It used to look the owner text up among every account of the console: a rule owned by an address of another
project's member was flagged "<their username> is not a member of the project", one owned by an unknown address
was not flagged at all — so any member (a viewer too) could learn whether an address has an account anywhere
in the console, and its username, by setting a rule's owner and reading the report.
"""
import pytest

from tests.audit_support import PERIOD, owned_rule
from tests.factories import client_for

pytestmark = pytest.mark.django_db

QUERY = {"project": "pretrain", "since": PERIOD.since.isoformat(), "until": PERIOD.until.isoformat()}


@pytest.fixture
def elsewhere(django_user_model, outsider):
    """An account of another project: username "oscar", an address that does not say so."""
    outsider.email = "ops-lead@example.org"
    outsider.save()
    return outsider


def owner_gone(rows, name):
    row = next(r for r in rows if r["rule"] == name)
    return [f["figure"] for f in row["flags"] if f["flag"] == "owner_gone"]


def test_an_address_with_an_account_elsewhere_reads_as_one_without(project, owner, teammate, elsewhere):
    owned_rule(project, "known-elsewhere", "ops-lead@example.org")
    owned_rule(project, "unknown", "no-account@example.org")
    answer = client_for(teammate).get("/api/v1/reports/rules/", QUERY)
    assert answer.status_code == 200
    rows = answer.json()["rules"]
    assert owner_gone(rows, "known-elsewhere") == owner_gone(rows, "unknown") == ["not a member of this project"]
    assert "oscar" not in answer.content.decode()  # the other account's username appears nowhere


def test_a_username_with_an_account_elsewhere_reads_as_one_without(project, owner, teammate, elsewhere):
    owned_rule(project, "username-elsewhere", "oscar")
    owned_rule(project, "username-nowhere", "nobody-here")
    rows = client_for(teammate).get("/api/v1/reports/rules/", QUERY).json()["rules"]
    assert owner_gone(rows, "username-elsewhere") == owner_gone(rows, "username-nowhere") == ["not a member of this project"]


def test_the_report_page_says_the_same(project, owner, teammate, elsewhere):
    owned_rule(project, "known-elsewhere", "ops-lead@example.org")
    page = client_for(teammate).get("/reports/rules/", QUERY).content.decode()
    assert "not a member of this project" in page and "oscar" not in page
