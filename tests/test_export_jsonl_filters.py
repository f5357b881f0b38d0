"""`types` and `since` narrow a JSONL export; a bad one is a 400 naming it, before any line is written."""
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.export_support import body_of, strict_lines
from tests.factories import client_for

pytestmark = pytest.mark.django_db


def types_in(client, query):
    return [line["type"] for line in strict_lines(body_of(client.get(f"/api/v1/projects/pretrain/export/{query}")))]


def test_types_keeps_only_the_records_asked_for(exported, owner):
    client = client_for(owner)
    assert types_in(client, "?types=events") == ["event"] * 3
    assert types_in(client, "?types=decisions,alerts") == ["alert", "alert", "decision", "decision"]
    assert types_in(client, "?format=jsonl&types=incidents") == ["incident"]


def test_since_keeps_what_began_at_or_after_it(exported, owner):
    client = client_for(owner)
    since = (timezone.now() - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    lines = strict_lines(body_of(client.get(f"/api/v1/projects/pretrain/export/?since={since}")))
    # The events happened in 2025 (the job's own times) and one decision was written a day ago.
    assert [line["type"] for line in lines] == ["alert", "alert", "incident", "decision"]
    assert lines[-1]["run"] == "exp-a"


@pytest.mark.parametrize("query, field", [
    ("?types=alerts,metrics", "types"),
    ("?types=", "types"),
    ("?types=alerts,,events", "types"),
    ("?since=yesterday", "since"),
    ("?format=csv", "format"),
])
def test_a_bad_parameter_is_a_400_naming_it(exported, owner, query, field):
    response = client_for(owner).get(f"/api/v1/runs/exp-a/export/{query}")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    [error] = response.json()["errors"]
    assert error["path"] == field
    if field == "types":
        assert "alerts, incidents, events, decisions" in error["message"]
