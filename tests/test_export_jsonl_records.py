"""What a JSONL export holds: every alert, incident, event and decision of the run or project, each a JSON line with its type."""
import pytest

from alerts.models import Incident
from tests.export_support import body_of, strict_lines
from tests.factories import client_for

pytestmark = pytest.mark.django_db


def export(user, path):
    return strict_lines(body_of(client_for(user).get(path)))


def test_a_run_export_holds_its_alerts_incident_events_and_decisions(exported, owner):
    lines = export(owner, "/api/v1/runs/exp-a/export/?format=jsonl")
    assert [line["type"] for line in lines] == ["alert", "alert", "incident", "event", "event", "decision"]
    assert {line["run"] for line in lines} == {"exp-a"} and {line["project"] for line in lines} == {"pretrain"}

    first, second = lines[0], lines[1]
    assert [first["id"], second["id"]] == exported["alerts"]
    assert (first["component"], first["step"], first["magnitude"], first["rule"]["name"]) == ("layers.4", 10, "Infinity", "grad-nonfinite")
    assert first["state"] == "firing" and first["fired_at"].startswith("20")
    assert [c["kind"] for c in second["changes"]] == ["fired", "acknowledged"] and second["changes"][1]["by"] == "olivia"
    assert second["state"] == "acknowledged" and second["magnitude"] == 2.0

    incident = lines[2]
    assert incident["id"] == Incident.objects.get().pk and incident["alerts"] == exported["alerts"]
    assert incident["origin"]["component"] == "layers.4" and incident["first_step"] == 10
    assert incident["changes"][0]["kind"] == "opened" and incident["opened_at"].startswith("20")

    nan_event, event = lines[3], lines[4]
    assert (nan_event["component"], nan_event["step"], nan_event["condition"], nan_event["magnitude"]) == ("gpu0", 7, "dead", "NaN")
    assert nan_event["time"] == 1_764_000_000.5 and nan_event["at"].startswith("2025-11-24T16:00:00.5")
    assert event["magnitude"] == 3.5 and isinstance(event["id"], int)

    decision = lines[5]
    assert decision["observation"] == "nan in layers.4" and decision["explanations"] == ["bad batch", "lr too high"]
    assert decision["owner"] == "Bob" and decision["author"] == "olivia"


def test_a_decision_line_is_the_decision_logs_own_export_line_with_its_type(exported, owner):
    client = client_for(owner)
    logged = strict_lines(body_of(client.get("/api/v1/decisions/?run=exp-a&format=jsonl")))
    exported_decisions = [line for line in export(owner, "/api/v1/runs/exp-a/export/") if line["type"] == "decision"]
    assert exported_decisions == [{"type": "decision", **entry} for entry in logged]


def test_a_project_export_holds_every_run_of_the_project_and_nothing_of_another(exported, owner):
    lines = export(owner, "/api/v1/projects/pretrain/export/?format=jsonl")
    assert {line["run"] for line in lines} == {"exp-a", "exp/b"}
    assert [line["type"] for line in lines].count("event") == 3 and [line["type"] for line in lines].count("decision") == 2
    assert all("other team" not in str(line) and line["project"] == "pretrain" for line in lines)


def test_each_type_keeps_the_same_keys_on_every_line(exported, owner):
    lines = export(owner, "/api/v1/projects/pretrain/export/")
    keys = {}
    for line in lines:
        keys.setdefault(line["type"], set()).add(tuple(line))
    assert all(len(shapes) == 1 for shapes in keys.values()), keys
    assert all(line.keys() >= {"type", "project", "run", "id"} for line in lines)
