"""No path may create or leave an alert rule without its five governance fields."""
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction

from alerts.models import Rule, RuleRevision
from alerts.rules import save_rule
from opsconsole.models import PersonalToken

pytestmark = pytest.mark.django_db
GOVERNANCE = ("owner", "scope", "persistence", "diagnostic_url", "permitted_response")


def rule_data(**overrides):
    data = {
        "project": "pretrain",
        "name": "loss-nonfinite",
        "kind": "nonfinite",
        "owner": "Pretrain on-call <#pretrain-oncall>",
        "scope": {"metrics": ["loss"], "phases": ["steady"]},
        "persistence": {"points": 1, "resolve_points": 5},
        "diagnostic_url": "https://runbooks.example/nonfinite-loss",
        "permitted_response": "notify",
    }
    data.update(overrides)
    return data


def model_rule(project, **overrides):
    data = rule_data(**overrides)
    data.pop("project")
    return Rule(project=project, **data)


# --- the model -----------------------------------------------------------------

@pytest.mark.parametrize("field", GOVERNANCE)
def test_model_validation_refuses_an_empty_governance_field(project, field):
    rule = model_rule(project, **{field: {} if field in ("scope", "persistence") else ""})
    with pytest.raises(ValidationError) as caught:
        save_rule(rule, source="test")
    assert field in caught.value.message_dict
    assert not Rule.objects.exists()


def test_automatic_stop_is_refused_on_a_rule_that_is_not_a_hard_invariant(project):
    with pytest.raises(ValidationError) as caught:
        save_rule(model_rule(project, kind="band", permitted_response="stop"), source="test")
    assert "hard-invariant" in caught.value.message_dict["permitted_response"][0]
    save_rule(model_rule(project, kind="nonfinite", permitted_response="stop"), source="test")  # allowed


def test_owner_without_a_contact_is_refused(project):
    with pytest.raises(ValidationError) as caught:
        save_rule(model_rule(project, owner="somebody"), source="test")
    assert "CONTACT" in caught.value.message_dict["owner"][0]


# --- the database, under every path that skips validation ------------------------

@pytest.mark.parametrize(
    "field, empty",
    [("owner", ""), ("scope", {}), ("persistence", {}), ("diagnostic_url", ""), ("permitted_response", "")],
)
def test_database_refuses_an_ungoverned_row_even_without_validation(project, field, empty):
    rule = model_rule(project, **{field: empty})
    with pytest.raises(IntegrityError), transaction.atomic():
        Rule.objects.bulk_create([rule])


def test_database_refuses_to_edit_a_rule_into_an_ungoverned_one(project):
    save_rule(model_rule(project), source="test")
    with pytest.raises(IntegrityError), transaction.atomic():
        Rule.objects.update(owner="")
    with pytest.raises(IntegrityError), transaction.atomic():
        Rule.objects.update(kind="threshold", permitted_response="rewind")


# --- the REST API ---------------------------------------------------------------

@pytest.fixture
def admin_api(api, owner):
    api.force_login(owner)  # rule admin of "pretrain"
    return api


@pytest.mark.parametrize("field", GOVERNANCE)
def test_api_create_without_a_governance_field_is_a_400_naming_it(admin_api, field):
    data = rule_data()
    del data[field]
    response = admin_api.post("/api/v1/rules/", data, format="json")
    assert response.status_code == 400
    assert field in {e["path"] for e in response.json()["errors"]}
    assert not Rule.objects.exists()


@pytest.mark.parametrize("field", GOVERNANCE)
def test_api_create_with_an_empty_governance_field_is_a_400_naming_it(admin_api, field):
    response = admin_api.post("/api/v1/rules/", rule_data(**{field: {} if field in ("scope", "persistence") else ""}), format="json")
    assert response.status_code == 400
    assert field in {e["path"] for e in response.json()["errors"]}


@pytest.mark.parametrize("field", GOVERNANCE)
def test_api_edit_that_empties_a_governance_field_is_a_400_and_changes_nothing(admin_api, field):
    created = admin_api.post("/api/v1/rules/", rule_data(), format="json").json()
    empty = {} if field in ("scope", "persistence") else ""
    response = admin_api.patch(f"/api/v1/rules/{created['id']}/", {field: empty}, format="json")
    assert response.status_code == 400
    assert field in {e["path"] for e in response.json()["errors"]}
    assert admin_api.get(f"/api/v1/rules/{created['id']}/").json()[field] == created[field]


def test_every_change_is_a_revision_row(admin_api, owner):
    created = admin_api.post("/api/v1/rules/", rule_data(), format="json").json()
    admin_api.patch(f"/api/v1/rules/{created['id']}/", {"permitted_response": "review"}, format="json")
    admin_api.delete(f"/api/v1/rules/{created['id']}/")
    revisions = list(RuleRevision.objects.values_list("action", "snapshot__permitted_response", "changed_by", "source"))
    assert revisions == [("created", "notify", owner.pk, "api"), ("updated", "review", owner.pk, "api"), ("deleted", "review", owner.pk, "api")]


def test_only_rule_admins_edit_rules(api, teammate, outsider, token):
    api.force_login(teammate)  # viewer of "pretrain"
    assert api.post("/api/v1/rules/", rule_data(), format="json").status_code == 403
    api.force_login(outsider)  # cannot see "pretrain": it answers as a project that does not exist
    response = api.post("/api/v1/rules/", rule_data(), format="json")
    assert response.status_code == 400 and [e["path"] for e in response.json()["errors"]] == ["project"]
    api.logout()
    assert api.post("/api/v1/rules/", rule_data(), format="json", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403
    assert not Rule.objects.exists()


def test_outsider_cannot_see_a_projects_rules(admin_api, api, outsider):
    created = admin_api.post("/api/v1/rules/", rule_data(), format="json").json()
    api.force_login(outsider)
    assert api.get(f"/api/v1/rules/{created['id']}/").status_code == 404
    assert api.get("/api/v1/rules/").json()["results"] == []


def test_personal_api_token_acts_with_its_users_roles(api, owner, teammate):
    out = StringIO()
    call_command("api_token", owner.username, stdout=out)
    raw = out.getvalue().strip()
    assert raw.startswith(PersonalToken.PREFIX) and len(out.getvalue().splitlines()) == 1
    response = api.post("/api/v1/rules/", rule_data(), format="json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 201, response.content
    out = StringIO()
    call_command("api_token", teammate.username, stdout=out)
    response = api.post("/api/v1/rules/", rule_data(name="other"), format="json", HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")
    assert response.status_code == 403


# --- the admin ------------------------------------------------------------------

def test_admin_form_refuses_a_rule_without_an_owner(client, django_user_model, project):
    admin = django_user_model.objects.create_superuser("root", password="pw-root")
    client.force_login(admin)
    data = rule_data(owner="")
    data.update(project=project.pk, scope='{"metrics": ["loss"]}', persistence='{"points": 1}', params="{}", enabled="on")
    response = client.post("/admin/alerts/rule/add/", data)
    assert response.status_code == 200  # the form again, with the error
    assert "owner" in response.context["adminform"].form.errors
    assert not Rule.objects.exists()
    data["owner"] = "Pretrain on-call <#pretrain-oncall>"
    assert client.post("/admin/alerts/rule/add/", data).status_code == 302
    assert RuleRevision.objects.get().source == "admin"


# --- rules as code --------------------------------------------------------------

RULES_YAML = """
rules:
  - project: pretrain
    name: loss-nonfinite
    kind: nonfinite
    owner: Pretrain on-call <#pretrain-oncall>
    scope: {metrics: [loss]}
    persistence: {points: 1}
    diagnostic_url: https://runbooks.example/nonfinite
    permitted_response: notify
"""


def test_load_rules_saves_a_governed_file(project, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(RULES_YAML)
    call_command("load_rules", str(path), stdout=StringIO())
    assert Rule.objects.get().owner == "Pretrain on-call <#pretrain-oncall>"
    assert RuleRevision.objects.get().source == "load_rules"


@pytest.mark.parametrize("field", GOVERNANCE)
def test_load_rules_refuses_a_file_missing_a_governance_field_and_saves_nothing(project, tmp_path, field):
    lines = [line for line in RULES_YAML.splitlines() if not line.strip().startswith(f"{field}:")]
    path = tmp_path / "rules.yaml"
    path.write_text("\n".join(lines) + "\n  - project: pretrain\n    name: second\n" + "\n".join(RULES_YAML.splitlines()[4:]))
    with pytest.raises(CommandError, match=rf"rules\[0\]\.{field}"):
        call_command("load_rules", str(path), stdout=StringIO())
    assert not Rule.objects.exists()


def test_load_rules_check_validates_without_saving(project, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(RULES_YAML)
    out = StringIO()
    call_command("load_rules", str(path), check=True, stdout=out)
    assert "1 rule(s) valid" in out.getvalue()
    assert not Rule.objects.exists()


def test_a_rule_with_alerts_is_not_deleted_by_the_api_but_can_be_disabled(api, owner, project, sender):
    from alerts.models import Alert, RuleRevision

    rule = save_rule(model_rule(project, scope={"metrics": ["loss"]}), source="test")
    api.force_authenticate(owner)
    sender.post({"run": {"id": "r"}, "points": [{"step": 1, "metric": "loss", "value": "NaN"}]})
    assert Alert.objects.filter(rule=rule).exists()
    revisions = RuleRevision.objects.count()
    response = api.delete(f"/api/v1/rules/{rule.pk}/")
    assert response.status_code == 409 and "disable" in response.json()["errors"][0]["message"]
    assert RuleRevision.objects.count() == revisions
    assert api.patch(f"/api/v1/rules/{rule.pk}/", {"enabled": False}, format="json").status_code == 200
