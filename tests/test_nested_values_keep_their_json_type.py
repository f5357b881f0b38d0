"""Inside nested objects and lists, a value of the wrong JSON type is refused as at the top: `links.runs: [123]`
is a 400 naming `links.runs[0]`, never stored as the run id "123"."""
import pytest

from reviews.models import LogEntry
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(sender):
    assert sender.post({"run": {"id": "123"}, "points": [{"step": 0, "metric": "loss", "value": 3.0}]}).status_code == 202


def write(client, **body):
    entry = {"run": "123", "observation": "loss flat", "explanations": ["data loader stalled"], **body}
    return client.post("/api/v1/decisions/", entry, content_type="application/json")


@pytest.mark.parametrize("body, path", [
    ({"links": {"runs": [123]}}, "links.runs[0]"),
    ({"links": {"runs": ["123", 123]}}, "links.runs[1]"),
    ({"links": {"alerts": ["5"]}}, "links.alerts[0]"),
    ({"links": {"evidence": [{"label": 7, "href": "/runs/123/"}]}}, "links.evidence[0].label"),
    ({"next_review": {"step": "100"}}, "next_review.step"),
])
def test_a_nested_value_of_the_wrong_type_is_refused_naming_it(run, oncall, body, path):
    answer = write(client_for(oncall), **body)
    assert answer.status_code == 400, answer.content
    assert [e["path"] for e in answer.json()["errors"]] == [path]
    assert not LogEntry.objects.exists()


def test_the_same_links_as_strings_are_stored(run, oncall):
    answer = write(client_for(oncall), links={"runs": ["123"]})
    assert answer.status_code == 201, answer.content
    assert answer.json()["links"]["runs"] == ["123"]
