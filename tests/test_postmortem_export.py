"""The postmortem export (.md and .json), the chronicle API and page: what each caller may see, and what they say."""
import pytest
from django.utils import timezone

from ingest.models import Run
from opsconsole.models import PersonalToken
from reviews.models import LogEntry
from tests.factories import OWNER, client_for, make_rule

pytestmark = pytest.mark.django_db

RUN = "team/llama-ft-7"  # run ids may contain "/"


@pytest.fixture
def interrupted(sender, project, owner):
    make_rule(project, "loss-nonfinite", kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3})
    points = [{"step": s, "metric": "loss", "value": "NaN" if s == 45 else 2.0} for s in range(0, 51)]
    assert sender.post({"run": {"id": RUN, "name": "Llama | fine-tune", "config": {"lr": 3e-4}}, "points": points}).status_code == 202
    run = Run.objects.get(run_id=RUN)
    LogEntry.objects.create(project=project, run=run, decision="intervene", observation="NaN at step 45",
                            explanations=["a bad batch", "fp16 overflow"], action="rewind to 40, skip batch 45",
                            owner=OWNER, author=owner, at=timezone.now(), step=50)
    again = [{"step": s, "metric": "loss", "value": 2.0} for s in range(40, 61)]
    assert sender.post({"run": {"id": RUN}, "phases": [{"step": 40, "phase": "restart"}], "points": again}).status_code == 202
    return run


@pytest.mark.parametrize("who, status", [("owner", 200), ("teammate", 200), ("outsider", 404)])
@pytest.mark.parametrize("path", ["postmortem.md", "postmortem.json", "chronicle/"])
def test_owner_and_teammate_read_the_export_and_an_outsider_gets_404(interrupted, request, who, status, path):
    response = client_for(request.getfixturevalue(who)).get(f"/api/v1/runs/{RUN}/{path}")
    assert response.status_code == status
    if status == 404:
        assert response["Content-Type"] == "application/json"
        assert response.json()["errors"]


def test_a_personal_token_reads_the_markdown_whatever_it_accepts(interrupted, owner, api):
    raw = PersonalToken.issue(owner)[1]
    response = api.get(f"/api/v1/runs/{RUN}/postmortem.md", HTTP_AUTHORIZATION=f"Bearer {raw}", HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "text/markdown; charset=utf-8"
    assert api.get(f"/api/v1/runs/{RUN}/postmortem.md").status_code in (401, 403)


def test_the_markdown_is_an_attachment_with_the_sections_and_the_interruption(interrupted, owner):
    response = client_for(owner).get(f"/api/v1/runs/{RUN}/postmortem.md")
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="postmortem-team_llama-ft-7.md"'
    text = response.content.decode("utf-8")
    assert text.startswith(f"# Postmortem: {RUN}\n")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Summary", "## Interruptions", "## Incidents", "## Decisions", "## Chronicle"]
    assert "| Name | Llama \\| fine-tune |" in text  # a bare pipe in a cell would break the table
    assert "| 2 | rewind 50 → 40 | 40 | 60 | planned/manual (intervene by Pretrain on-call &lt;#pretrain-oncall&gt;) |" in text  # the owner text HTML-escaped (tests/test_postmortem_markdown_is_inert.py)
    assert "| intervene | NaN at step 45 | a bad batch; fp16 overflow | rewind to 40, skip batch 45 |" in text
    assert "loss-nonfinite" in text.split("## Incidents")[1]


def test_the_json_holds_identity_figures_attempts_incidents_decisions_and_the_chronicle(interrupted, teammate):
    body = client_for(teammate).get(f"/api/v1/runs/{RUN}/postmortem.json").json()
    assert body["run"]["run_id"] == RUN and body["run"]["config"] == {"lr": 3e-4}
    summary = body["summary"]
    assert (summary["attempts"], summary["interruptions"], summary["rewinds"]) == (2, 1, 1)
    assert (summary["steps_computed"], summary["steps_kept"]) == (51 + 21, 40 + 21)
    assert summary["interruptions_by_cause"] == [{"cause": "planned/manual", "count": 1, "share": 1.0}]
    second = body["attempts"][1]
    assert second["cause"] == "planned/manual"
    assert [a["rule"] for a in second["evidence"]["numeric alert"]] == ["loss-nonfinite"]  # also found, not chosen
    [incident] = body["incidents"]
    assert incident["origin"]["rule"] == "loss-nonfinite" and incident["first_step"] == 45
    [decision] = body["decisions"]
    assert decision["decision"] == "intervene" and decision["explanations"] == ["a bad batch", "fp16 overflow"]
    chronicle = client_for(teammate).get(f"/api/v1/runs/{RUN}/chronicle/").json()
    assert chronicle == body["chronicle"]
    assert [e["at"] for e in chronicle] == sorted(e["at"] for e in chronicle)


def test_the_run_page_links_the_chronicle_and_the_postmortem_and_the_chronicle_page_shows_the_cause(interrupted, owner, outsider):
    client = client_for(owner)
    page = client.get(f"/runs/{RUN}/").content.decode()
    for href in (f"/runs/{RUN}/chronicle/", f"/api/v1/runs/{RUN}/postmortem.md", f"/api/v1/runs/{RUN}/postmortem.json"):
        assert f'href="{href}"' in page
    chronicle = client.get(f"/runs/{RUN}/chronicle/")
    assert chronicle.status_code == 200
    html = chronicle.content.decode()
    assert "rewind from 50 to 40" in html and "planned/manual (intervene by" in html
    assert client_for(outsider).get(f"/runs/{RUN}/chronicle/").status_code == 404


def test_the_schema_documents_the_markdown_as_text_markdown_and_errors_as_json(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    markdown = schema["paths"]["/api/v1/runs/{run_id}/postmortem.md"]["get"]["responses"]
    assert list(markdown["200"]["content"]) == ["text/markdown"]
    assert markdown["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    for path in ("/api/v1/runs/{run_id}/postmortem.json", "/api/v1/runs/{run_id}/chronicle/"):
        assert "404" in schema["paths"][path]["get"]["responses"]
