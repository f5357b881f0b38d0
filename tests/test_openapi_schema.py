"""The OpenAPI schema at /api/schema/: generated without a warning, and saying what the API does.

Every operation declares the credentials it takes (the project and personal bearer tokens, ingest
and Alertmanager included), its request bodies (the JSON batch and NDJSON for ingest), the 4xx
statuses it answers in the API's error body, and the constraints of its parameters. That the API
keeps to all of it is what tests/test_api_fuzzing.py checks, with Schemathesis.
"""
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
