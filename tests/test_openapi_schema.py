import pytest

pytestmark = pytest.mark.django_db


def test_schema_documents_the_v1_endpoints(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    for path in ("/api/v1/ingest", "/api/v1/runs/", "/api/v1/runs/{run_id}/", "/api/v1/runs/{run_id}/points/"):
        assert path in schema["paths"], path
    assert "post" in schema["paths"]["/api/v1/ingest"]
