"""The OpenAPI schema at /api/schema/: generated without a warning, and saying what the API does.

Every operation declares the credentials it takes (the project and personal bearer tokens, ingest
and Alertmanager included), its request bodies (the JSON batch and NDJSON for ingest), the 4xx
statuses it answers in the API's error body, and the constraints of its parameters. That the API
keeps to all of it is what tests/test_api_fuzzing_*_token.py checks, with Schemathesis.
"""
import re

import pytest
from drf_spectacular.drainage import GENERATOR_STATS

from ingest.contract import MAX_STEP, MAX_TIME

pytestmark = pytest.mark.django_db

TOKENS = {"projectToken", "personalToken"}


@pytest.fixture
def schema(client):
    GENERATOR_STATS.reset()  # warnings are emitted once per process: count this generation's own
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield f"{method.upper()} {path}", operation


def test_schema_documents_the_v1_endpoints(schema):
    assert schema["openapi"].startswith("3.")
    for path in ("/api/v1/ingest", "/api/v1/runs/", "/api/v1/runs/{run_id}/", "/api/v1/runs/{run_id}/points/"):
        assert path in schema["paths"], path
    assert "post" in schema["paths"]["/api/v1/ingest"]


def test_schema_generates_without_a_warning(schema):
    # It logged ~30 (no security scheme for the two token classes, an operationId collision).
    assert not GENERATOR_STATS._warn_cache and not GENERATOR_STATS._error_cache, dict(GENERATOR_STATS._warn_cache)


def test_both_tokens_are_bearer_schemes_and_every_operation_declares_its_credentials(schema):
    schemes = schema["components"]["securitySchemes"]
    for name in TOKENS:
        assert schemes[name]["type"] == "http" and schemes[name]["scheme"] == "bearer"
    for label, operation in operations(schema):
        declared = {name for requirement in operation["security"] for name in requirement}
        expected = {"projectToken"} if label in ("POST /api/v1/ingest", "POST /api/v1/alertmanager") else TOKENS | {"cookieAuth"}
        assert declared == expected, label


def test_every_operation_lists_the_4xx_it_answers_in_the_error_body(schema):
    for label, operation in operations(schema):
        statuses = set(operation["responses"])
        assert {"400", "401", "413", "415"} <= statuses, label
        for status in statuses - {"200", "201", "202", "204"}:
            content = operation["responses"][status]["content"]["application/json"]["schema"]
            assert content == {"$ref": "#/components/schemas/ErrorBody"}, (label, status)
    paths = schema["paths"]
    assert "403" in paths["/api/v1/ingest"]["post"]["responses"]
    assert "404" in paths["/api/v1/runs/{run_id}/points/"]["get"]["responses"]
    assert {"403", "404"} <= set(paths["/api/v1/alerts/{id}/mute/"]["post"]["responses"])
    assert "409" in paths["/api/v1/rules/{id}/"]["delete"]["responses"]
    error = schema["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["errors"] and "more_errors" in error["properties"]


def test_ingest_documents_the_json_batch_and_ndjson(schema):
    body = schema["paths"]["/api/v1/ingest"]["post"]["requestBody"]
    assert body["required"] is True
    batch = body["content"]["application/json"]["schema"]
    assert batch["required"] == ["run"] and batch["additionalProperties"] is False
    point = batch["properties"]["points"]["items"]
    assert point["required"] == ["step", "metric", "value"]
    assert point["properties"]["step"] == {"type": "integer", "minimum": 0, "maximum": MAX_STEP}
    assert point["properties"]["time"]["maximum"] == MAX_TIME
    assert point["properties"]["metric"]["pattern"] == "^[A-Za-z0-9._/-]{1,128}$"
    assert body["content"]["application/x-ndjson"]["schema"]["type"] == "string"
    alertmanager = schema["paths"]["/api/v1/alertmanager"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert alertmanager["properties"]["version"]["enum"] == ["4"]


def test_parameters_carry_their_constraints(schema):
    def params(path, method="get"):
        return {p["name"]: p["schema"] for p in schema["paths"][path][method]["parameters"]}

    points = params("/api/v1/runs/{run_id}/points/")
    assert points["start"]["minimum"] == 0 and points["start"]["maximum"] == MAX_STEP
    assert points["attempt"]["enum"] == ["all"]
    assert points["metric"]["pattern"] == "^(?:[A-Za-z0-9._/-]{1,128})$"
    assert points["run_id"]["pattern"] == "^[A-Za-z0-9._:/-]{1,128}$"
    inbox = params("/api/v1/inbox/")
    assert (inbox["limit"]["minimum"], inbox["limit"]["maximum"]) == (1, 500)
    assert inbox["rule"]["maximum"] == 2**63 - 1 and "open" in inbox["state"]["enum"]
    series = params("/api/v1/runs/{run_id}/series/")
    assert (series["buckets"]["minimum"], series["buckets"]["maximum"]) == (1, 5000)
    assert params("/api/v1/runs/{run_id}/events/")["condition"]["enum"][0] == "dead"


def test_the_schema_states_the_rules_the_server_enforces_on_its_own(schema):
    """What Schemathesis found the server refusing while the schema allowed it (issue 24)."""
    for label, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            free = parameter["schema"]
            if parameter["in"] == "query" and free.get("type") == "string" and not {"enum", "format"} & set(free):
                # Every free query string excludes NUL by its pattern (the request guard refuses it anywhere in the URL).
                assert re.search(free["pattern"], "abc\x00") is None, (label, parameter["name"])
    [search] = [p["schema"]["pattern"] for p in schema["paths"]["/api/v1/runs/"]["get"]["parameters"] if p["name"] == "q"]
    assert re.search(search, "any words") and not re.search(search, "any\x00words")
    schemas = schema["components"]["schemas"]
    assert schemas["BacktestRequest"]["properties"]["project"]["minLength"] == 1
    assert schemas["Schedule"]["properties"]["project"]["minLength"] == 1
    assert schemas["Schedule"]["anyOf"] == [{"required": ["every_steps"]}, {"required": ["every_hours"]}]
    backtest = next(op for _, op in operations(schema) if op["operationId"] == "rules_backtest")
    assert backtest["requestBody"]["required"] is True
    ack = schema["paths"]["/api/v1/alerts/{id}/acknowledge/"]["post"]["responses"]["400"]["description"]
    assert "a resolved alert" in ack


@pytest.mark.parametrize("body", [{}, {"project": "pretrain"}, {"project": "", "every_steps": 500}])
def test_what_the_schedule_schema_refuses_the_server_refuses(owner, project, body):
    from tests.factories import client_for

    answer = client_for(owner).put("/api/v1/review-schedules/", body, content_type="application/json")
    assert answer.status_code == 400, answer.content
