"""The console's rule form refuses an ungoverned rule, with the API's own message on the field (its leading key
written as the field's label: "Diagnostic URL is required", not "diagnostic_url …"), and saves nothing."""
import json
from html import unescape

import pytest

from alerts.models import Rule, RuleRevision
from alerts.rules import save_rule

pytestmark = pytest.mark.django_db
GOVERNANCE = ("owner", "scope", "persistence", "diagnostic_url", "permitted_response")
EMPTY = {"owner": "", "scope": "{}", "persistence": "{}", "diagnostic_url": "", "permitted_response": ""}

GOVERNED = {
    "name": "loss-nonfinite",
    "project": "pretrain",
    "kind": "nonfinite",
    "description": "",
    "owner": "Pretrain on-call <#pretrain-oncall>",
    "scope": {"metrics": ["loss"], "phases": ["steady"]},
    "persistence": {"points": 1, "resolve_points": 5},
    "diagnostic_url": "https://runbooks.example/nonfinite-loss",
    "permitted_response": "notify",
}


def form_data(**overrides):
    data = {key: json.dumps(value) if isinstance(value, dict) else value for key, value in GOVERNED.items()}
    data.update(params="", enabled="on")
    data.update(overrides)
    return data


@pytest.fixture
def console(client, owner):
    client.force_login(owner)  # rule admin of "pretrain"
    return client


@pytest.fixture
def existing(project, owner):
    data = {k: v for k, v in GOVERNED.items() if k != "project"}
    return save_rule(Rule(project=project, **data), user=owner, source="api")


def api_message(api, owner, field, value):
    """What the REST API says about the same value of the same field."""
    api.force_login(owner)
    body = {**GOVERNED, field: value}
    errors = api.post("/api/v1/rules/", body, format="json").json()["errors"]
    return [e["message"] for e in errors if e["path"] == field]


LABELS = {"owner": "Owner", "diagnostic_url": "Diagnostic URL", "permitted_response": "Permitted response"}


def in_words(field, message):
    """The API's message as the form shows it: a leading key becomes the field's label (scope and persistence,
    whose JSON boxes speak in keys, keep theirs)."""
    if field in LABELS and message.startswith(f"{field} "):
        return LABELS[field] + message[len(field):]
    return message


def shown_on_field(response, field, message):
    """The message is rendered inside that field's block of the form."""
    html = unescape(response.content.decode())
    block = html[html.index(f'id="field-{field}"'):]
    block = block[:block.index('<div class="field')] if '<div class="field' in block else block
    return message in block


@pytest.mark.parametrize("missing", [False, True], ids=["empty", "missing"])
@pytest.mark.parametrize("field", GOVERNANCE)
def test_create_without_a_governance_field_is_refused_on_that_field(console, api, owner, field, missing):
    data = form_data(**{field: EMPTY[field]})
    if missing:
        del data[field]
    response = console.post("/rules/new/", data)
    assert response.status_code == 200  # the form again
    errors = response.context["form"].errors
    assert set(errors) == {field}
    # The governance message, as the API gives it (the API may add Django's generic "cannot be blank" too).
    assert len(errors[field]) == 1
    assert errors[field][0].startswith(in_words(field, f"{field} is required"))
    api_said = api_message(api, owner, field, {} if field in ("scope", "persistence") else "")
    assert errors[field][0] in [in_words(field, m) for m in api_said]
    assert shown_on_field(response, field, errors[field][0])
    assert not Rule.objects.exists() and not RuleRevision.objects.exists()


@pytest.mark.parametrize("missing", [False, True], ids=["empty", "missing"])
@pytest.mark.parametrize("field", GOVERNANCE)
def test_edit_that_drops_a_governance_field_is_refused_and_changes_nothing(console, existing, field, missing):
    data = form_data(**{field: EMPTY[field]}, description="edited")
    if missing:
        del data[field]
    response = console.post(f"/rules/{existing.pk}/edit/", data)
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {field}
    assert shown_on_field(response, field, response.context["form"].errors[field][0])
    stored = Rule.objects.get(pk=existing.pk)
    assert stored.snapshot() == existing.snapshot()
    assert list(RuleRevision.objects.values_list("action", flat=True)) == ["created"]


@pytest.mark.parametrize(
    "field, value, form_value",
    [
        ("owner", "somebody", "somebody"),
        ("scope", {"metrics": ["loss"], "colour": "red"}, '{"metrics": ["loss"], "colour": "red"}'),
        ("scope", {"phases": ["steady"]}, '{"phases": ["steady"]}'),
        ("persistence", {"points": 3, "seconds": 60}, '{"points": 3, "seconds": 60}'),
        ("persistence", {"points": 0}, '{"points": 0}'),
        ("diagnostic_url", "runbooks.example/x", "runbooks.example/x"),
    ],
)
def test_an_invalid_governance_value_gets_the_apis_message(console, api, owner, field, value, form_value):
    response = console.post("/rules/new/", form_data(**{field: form_value}))
    assert response.status_code == 200
    assert response.context["form"].errors[field] == [in_words(field, m) for m in api_message(api, owner, field, value)]
    assert not Rule.objects.exists()


def test_an_automatic_stop_only_on_a_hard_invariant(console):
    response = console.post("/rules/new/", form_data(kind="band", permitted_response="stop"))
    assert response.status_code == 200
    assert "hard-invariant" in response.context["form"].errors["permitted_response"][0]
    assert not Rule.objects.exists()
    assert console.post("/rules/new/", form_data(kind="nonfinite", permitted_response="stop")).status_code == 302


def test_a_valid_create_writes_one_console_revision_with_the_user(console, owner):
    response = console.post("/rules/new/", form_data())
    assert response.status_code == 302
    rule = Rule.objects.get()
    revision = RuleRevision.objects.get()
    assert (revision.rule, revision.action, revision.source, revision.changed_by) == (rule, "created", "console", owner)
    assert revision.snapshot == rule.snapshot()
    assert revision.snapshot["owner"] == "Pretrain on-call <#pretrain-oncall>"
