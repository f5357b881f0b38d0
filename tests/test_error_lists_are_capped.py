"""An error list never grows with the input: the first 100 errors, and `more_errors` counting the rest.

A 4 MiB body of two million bad NDJSON lines once answered with a 202 MB list
of errors (and a 1.1 GB worker). Every 4xx body of the API is capped the same
way: ingest (both formats) and the JSON bodies of the other endpoints; and a
body with more lines than a request can hold is a 413 before any line is read.
"""
import pytest

from ingest.contract import MAX_ERRORS, MAX_LINES
from tests.conftest import stored_counts
from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


def capped(response, total):
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert len(body["errors"]) == MAX_ERRORS == 100
    assert body["more_errors"] == total - MAX_ERRORS
    return body["errors"]


def test_four_mib_of_bad_ndjson_lines_is_a_short_413(sender):
    before = stored_counts()
    response = sender.post(b"1\n" * (2 * MIB), content_type="application/x-ndjson")
    assert response.status_code == 413 and len(response.content) < 500, response.content[:500]
    assert response.json()["errors"] == [{"path": "", "message": (
        f"body has {2 * MIB} lines; at most {MAX_LINES} per request (10000 points and events, 10000 phases and a run line)"
        " — split the batch")}]
    assert stored_counts() == before


@pytest.mark.parametrize("line", [b"1", b"x", b'{"type": "point", "run": "r", "value": NaN'])
def test_as_many_bad_ndjson_lines_as_a_request_holds_answer_the_first_100_errors_and_a_count(sender, line):
    before = stored_counts()
    response = sender.post((line + b"\n") * MAX_LINES, content_type="application/x-ndjson")
    errors = capped(response, MAX_LINES)
    assert len(response.content) < 20_000, f"the error body is {len(response.content)} bytes"
    assert [e["path"] for e in errors[:3]] == ["lines[1]", "lines[2]", "lines[3]"] and errors[99]["path"] == "lines[100]"
    assert errors[0]["message"].startswith("line 1: ")
    assert stored_counts() == before


def test_a_json_batch_with_thousands_of_unknown_fields_is_capped_too(sender):
    body = {"run": {"id": "capped"}, **{f"field{i}": 1 for i in range(5000)}}
    errors = capped(sender.post(body), 5000)
    assert errors[0] == {"path": "field0", "message": "unknown field 'field0'"}


def test_a_100_error_batch_lists_all_100_and_no_count(sender):
    body = {"run": {"id": "capped"}, **{f"field{i}": 1 for i in range(100)}}
    response = sender.post(body)
    assert response.status_code == 400
    assert len(response.json()["errors"]) == 100 and "more_errors" not in response.json()


def test_api_request_bodies_are_capped_too(api, oncall, project):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    api.force_login(oncall)
    body = {"scope": "run", "reason": "x", "duration_minutes": 60, **{f"k{i}": "\x00" for i in range(1000)}}
    response = api.post(f"/api/v1/alerts/{alert.pk}/mute/", body, format="json")
    errors = capped(response, 1000)
    assert errors[0]["path"] == "k0" and "NUL" in errors[0]["message"]
