"""Creating a rule where the caller may not leaves no trace of what exists there.

Whether a rule name is taken is checked only once the caller may edit the
project's rules; a project the caller cannot see answers exactly as a project
that does not exist (as the rest of the console answers outsiders).
"""
import pytest

from alerts.models import Rule
from tests.factories import make_rule

pytestmark = pytest.mark.django_db


def rule_body(project="pretrain", name="loss-spike", **overrides):
    return {
        "project": project, "name": name, "kind": "nonfinite", "owner": "Someone <#someone>",
        "scope": {"metrics": ["loss"]}, "persistence": {"points": 1},
        "diagnostic_url": "https://runbooks.example/x", "permitted_response": "notify", **overrides,
    }


@pytest.fixture
def existing(project, owner):
    return make_rule(project, name="loss-spike", user=owner)


def answer(response):
    return response.status_code, response.json()


def test_outsider_gets_the_same_answer_for_a_taken_name_and_a_free_one(api, outsider, existing):
    api.force_login(outsider)
    taken = answer(api.post("/api/v1/rules/", rule_body(name="loss-spike"), format="json"))
    free = answer(api.post("/api/v1/rules/", rule_body(name="no-such-rule"), format="json"))
    assert taken == free
    assert Rule.objects.count() == 1


def test_outsider_cannot_tell_a_hidden_project_from_a_missing_one(api, outsider, existing):
    api.force_login(outsider)
    hidden = api.post("/api/v1/rules/", rule_body(project="pretrain"), format="json")
    missing = api.post("/api/v1/rules/", rule_body(project="no-such-project"), format="json")
    assert hidden.status_code == missing.status_code == 400
    strip = lambda errors: [(e["path"], e["message"].replace("pretrain", "X").replace("no-such-project", "X")) for e in errors]
    assert strip(hidden.json()["errors"]) == strip(missing.json()["errors"])
    assert [e["path"] for e in hidden.json()["errors"]] == ["project"]


def test_a_viewer_is_refused_before_uniqueness_is_checked(api, teammate, existing):
    api.force_login(teammate)  # sees the project's rules, may not edit them
    taken = answer(api.post("/api/v1/rules/", rule_body(name="loss-spike"), format="json"))
    free = answer(api.post("/api/v1/rules/", rule_body(name="no-such-rule"), format="json"))
    assert taken == free and taken[0] == 403


def test_a_job_token_is_refused_the_same_way(api, token, existing):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    taken = answer(api.post("/api/v1/rules/", rule_body(name="loss-spike"), format="json", **auth))
    free = answer(api.post("/api/v1/rules/", rule_body(name="no-such-rule"), format="json", **auth))
    assert taken == free and taken[0] == 403


def test_a_viewer_renaming_a_rule_is_refused_before_uniqueness_is_checked(api, project, owner, teammate, existing):
    other = make_rule(project, name="other-rule", user=owner)
    api.force_login(teammate)
    taken = answer(api.patch(f"/api/v1/rules/{other.pk}/", {"name": "loss-spike"}, format="json"))
    free = answer(api.patch(f"/api/v1/rules/{other.pk}/", {"name": "free-name"}, format="json"))
    assert taken == free and taken[0] == 403


def test_moving_a_rule_into_a_hidden_project_answers_as_a_missing_one(api, django_user_model, project, other_project, existing):
    from opsconsole.models import Membership, Role

    admin = django_user_model.objects.create_user("vera", password="pw")
    Membership.objects.create(user=admin, project=other_project, role=Role.RULE_ADMIN)
    mine = make_rule(other_project, name="mine", user=admin)
    api.force_login(admin)
    hidden = api.patch(f"/api/v1/rules/{mine.pk}/", {"project": "pretrain", "name": "loss-spike"}, format="json")
    missing = api.patch(f"/api/v1/rules/{mine.pk}/", {"project": "no-such-project", "name": "loss-spike"}, format="json")
    assert hidden.status_code == missing.status_code == 400
    assert [e["path"] for e in hidden.json()["errors"]] == [e["path"] for e in missing.json()["errors"]] == ["project"]
    assert Rule.objects.get(pk=mine.pk).project == other_project


def test_a_rule_admin_still_hears_that_the_name_is_taken_on_the_name(api, owner, existing):
    api.force_login(owner)
    response = api.post("/api/v1/rules/", rule_body(name="loss-spike"), format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == ["name"]
    assert "already has a rule named" in response.json()["errors"][0]["message"]
