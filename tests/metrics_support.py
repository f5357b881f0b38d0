"""Reading the console's /metrics as Prometheus does: the samples by name and labels."""
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict:
    """{(sample name, ((label, value), ...)): value} of a Prometheus text exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return samples(response.content.decode())
