"""JSON nested deeper than MAX_JSON_DEPTH (64) levels is a 400 naming where, never a RecursionError (500).

Nesting of 950-1021 levels in ingest `config` or `detail` passed the parser and
then overflowed the stack when stored; ~5,000 levels in any API body overflowed
DRF's parser. One limit, counted from the top of the JSON document (a request
body, or one NDJSON line), is refused where it is parsed.
"""
import pytest

from ingest.contract import MAX_JSON_DEPTH
from tests.conftest import stored_counts
from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db


def nested(levels):
    """`levels` objects inside one another, innermost holding a number."""
    return '{"a":' * levels + "1" + "}" * levels


def batch_with_config(config_text):
    return '{"run": {"id": "deep", "config": %s}}' % config_text


def event_with_detail(detail_text):
    return ('{"run": {"id": "deep"}, "events": [{"step": 1, "component": "gpu0", "condition": "dead",'
            ' "magnitude": 1, "detail": %s}]}' % detail_text)


@pytest.mark.parametrize("levels", [100, 950, 1000, 1021, 1100, 5000])
def test_deep_config_and_detail_are_400s_naming_the_field(sender, levels):
    before = stored_counts()
    for body, field in ((batch_with_config(nested(levels)), "run.config"), (event_with_detail(nested(levels)), "events[0].detail")):
        response = sender.post(body)
        assert response.status_code == 400, (levels, response.content[:200])
        error = response.json()["errors"][0]
        assert error["path"].startswith(field) or error["path"] == "", error
        assert "nested too deeply" in error["message"] and "64" in error["message"], error
    assert stored_counts() == before


def test_the_limit_counts_from_the_top_of_the_document(sender):
    # The run object is level 2 of a JSON batch and config level 3: 62 more objects inside it reach 64.
    assert sender.post(batch_with_config(nested(MAX_JSON_DEPTH - 2))).status_code == 202
    response = sender.post(batch_with_config(nested(MAX_JSON_DEPTH - 1)))
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "run.config" + ".a" * (MAX_JSON_DEPTH - 2)
    # An NDJSON run line is its own document: its config is level 2.
    line = '{"type": "run", "id": "deep", "config": %s}\n'
    assert sender.post(line % nested(MAX_JSON_DEPTH - 1), content_type="application/x-ndjson").status_code == 202
    response = sender.post(line % nested(MAX_JSON_DEPTH), content_type="application/x-ndjson")
    assert response.status_code == 400 and response.json()["errors"][0]["path"].startswith("lines[1].config.a")


def test_deep_ndjson_detail_is_a_400_at_its_line(sender):
    body = '{"type": "event", "run": "deep", "step": 1, "component": "gpu0", "condition": "dead", "magnitude": 1, "detail": %s}\n'
    response = sender.post(body % nested(1000), content_type="application/x-ndjson")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["path"].startswith("lines[1].detail") and error["message"].startswith("line 1: ")


@pytest.mark.parametrize("levels", [65, 1000, 5000, 100_000])
def test_deep_api_bodies_are_400s(api, oncall, project, levels):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    api.force_login(oncall)
    for body in (nested(levels), "[" * levels + "]" * levels):
        response = api.generic("POST", f"/api/v1/alerts/{alert.pk}/mute/", body, content_type="application/json")
        assert response.status_code == 400, (levels, response.content[:200])
        assert "nested too deeply" in response.json()["errors"][0]["message"]
    assert not alert.changes.exclude(kind="fired").exists()


def test_an_api_body_at_the_limit_is_read(api, oncall, project):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    api.force_login(oncall)
    body = '{"scope": "run", "reason": "x", "duration_minutes": 60, "extra": %s}' % nested(MAX_JSON_DEPTH - 2)
    assert api.generic("POST", f"/api/v1/alerts/{alert.pk}/mute/", body, content_type="application/json").status_code == 201
