r"""Evidence links of decisions and log entries lead to pages of this console, never off-site.

The check was "starts with /, not //": `/\host`, `/\t/host` and `/\n/host` passed it, and browsers read them as
`//host` (a backslash is a slash to them; tabs and newlines are dropped) — one click on a decision's evidence
took the reader to another site. Now a link is a path the console's own URL resolver serves, without
backslashes, white space or control characters; a link stored before the check is shown as text.
"""
import pytest
from django.urls import reverse

from ingest.models import Run
from reviews.models import LogEntry
from tests.factories import client_for

pytestmark = pytest.mark.django_db

OFF_SITE = [
    "/\\evil.example",
    "/\\\\evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/\r/evil.example",
    "/\x0b/evil.example",
    "/ /evil.example",
    "/\u2028/evil.example",
    "/\u200b/evil.example",
    "//evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "/no-such-page-here/",
]


@pytest.fixture
def run(sender):
    points = [{"step": s, "metric": "loss", "value": 3.0 - s / 100} for s in range(50)]
    assert sender.post({"run": {"id": "r-evidence"}, "points": points}).status_code == 202
    return Run.objects.get(run_id="r-evidence")


def write(client, href):
    return client.post("/api/v1/decisions/", {
        "run": "r-evidence", "observation": "loss flat", "explanations": ["data loader stuck"],
        "links": {"evidence": [{"label": "look here", "href": href}]},
    }, content_type="application/json")


def decide(client, href):
    review = client.post("/api/v1/reviews/", {"run": "r-evidence"}, content_type="application/json").json()
    return client.post(f"/api/v1/reviews/{review['id']}/decision/", {
        "decision": "continue", "observation": "fine", "explanations": ["on track"],
        "evidence": [{"label": "look here", "href": href}],
    }, content_type="application/json")


@pytest.mark.parametrize("href", OFF_SITE)
def test_an_off_site_evidence_link_is_refused_naming_the_field(run, oncall, href):
    client = client_for(oncall)
    for answer in (write(client, href), decide(client, href)):
        assert answer.status_code == 400, (href, answer.content)
        assert [e["path"] for e in answer.json()["errors"]] == ["links.evidence"]
    assert not LogEntry.objects.exists()


def test_pages_of_the_console_are_accepted(run, oncall):
    client = client_for(oncall)
    hrefs = [reverse("console:run", args=["r-evidence"]) + "?metric=loss&start=10&end=40",
             reverse("console:inbox") + "?state=all&project=pretrain#alert-1",
             "/decisions/?run=r-evidence"]
    for href in hrefs:
        assert write(client, href).status_code == 201, href
    assert decide(client, hrefs[0]).status_code == 201
    page = client.get("/decisions/?run=r-evidence").content.decode()
    assert page.count('href="/runs/r-evidence/?metric=loss&amp;start=10&amp;end=40"') == 2


def test_a_link_stored_before_the_check_is_shown_as_text(run, oncall):
    LogEntry.objects.create(project=run.project, run=run, author=oncall, at=run.created_at, observation="old entry",
                            explanations=["from before"], owner="omar",
                            links={"evidence": [{"label": "look here", "href": "/\\evil.example"}]})
    page = client_for(oncall).get("/decisions/?run=r-evidence").content.decode()
    assert "old entry" in page and "look here" in page
    assert 'href="/\\evil.example"' not in page and "not a page of this console" in page
