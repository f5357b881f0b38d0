"""The open inbox counts the alerts that ended by themselves with no verdict up to a limit (alerts.pages.QUIET_COUNTED)
and says "more than" past it: the line costs the same at 48,000 such alerts as at 48 (benchmarks/read_paths.py),
and the "all of them" link leads to the filter that lists and counts every one."""
import re

import pytest

from alerts import pages
from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db


def quiet_line(client) -> str:
    html = client.get("/inbox/").content.decode()
    return re.search(r'<section class="resolved-no-verdict".*?</h2>', html, re.S).group(0)


@pytest.fixture
def quiet(project):
    band = make_rule(project, kind="band")
    return lambda n: [make_alert(band, "run-a", f"layers.{i}", state="resolved") for i in range(n)]


def test_up_to_the_limit_the_count_is_exact(client, owner, quiet, monkeypatch):
    monkeypatch.setattr(pages, "QUIET_COUNTED", 3)
    monkeypatch.setattr(pages, "QUIET_SHOWN", 2)
    quiet(3)
    client.force_login(owner)
    line = quiet_line(client)
    assert "3 alerts ended by themselves and nobody said whether they were real; the 2 newest here" in line
    assert "More than" not in line


def test_past_the_limit_the_page_says_more_than_and_links_to_all_of_them(client, owner, quiet, monkeypatch):
    monkeypatch.setattr(pages, "QUIET_COUNTED", 3)
    monkeypatch.setattr(pages, "QUIET_SHOWN", 2)
    quiet(5)
    client.force_login(owner)
    line = quiet_line(client)
    assert "More than 3 alerts ended by themselves and nobody said whether they were real; the 2 newest here" in line
    assert 'href="?state=resolved_no_verdict">all of them</a>' in line
    listed = client.get("/inbox/", {"state": "resolved_no_verdict"}).content.decode()
    assert len(re.findall(r'<tr id="alert-\d+"', listed)) == 5  # the filter lists every one


def test_past_the_limit_with_all_of_them_on_the_page_it_still_says_more_than(client, owner, quiet, monkeypatch):
    monkeypatch.setattr(pages, "QUIET_COUNTED", 3)
    quiet(4)  # 4 listed (QUIET_SHOWN is 20), counted as "more than 3"
    client.force_login(owner)
    line = quiet_line(client)
    assert "More than 3 alerts ended by themselves" in line and "the 4 newest here" in line
