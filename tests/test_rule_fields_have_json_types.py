"""In a JSON body a rule's fields have their JSON types, as the schema says: `enabled: 0` or
`description: 5` are refused naming the field (DRF alone read them as false and "5"); forms keep their text."""
import pytest

from tests.factories import make_rule

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", [0, 1, "true", 1.0])
def test_a_number_or_text_for_enabled_in_json_is_refused(api, owner, project, value):
    rule = make_rule(project, kind="nonfinite")
    api.force_authenticate(owner)
    response = api.patch(f"/api/v1/rules/{rule.pk}/", {"enabled": value}, format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == ["enabled"]
    rule.refresh_from_db()
    assert rule.enabled is True


@pytest.mark.parametrize("field, value", [("description", 5), ("owner", True), ("name", 1.5)])
def test_a_non_string_text_field_in_json_is_refused(api, owner, project, field, value):
    rule = make_rule(project, kind="nonfinite")
    api.force_authenticate(owner)
    response = api.patch(f"/api/v1/rules/{rule.pk}/", {field: value}, format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == [field]


def test_json_false_disables_and_a_form_false_too(api, owner, project):
    rule = make_rule(project, kind="nonfinite")
    api.force_authenticate(owner)
    assert api.patch(f"/api/v1/rules/{rule.pk}/", {"enabled": False}, format="json").status_code == 200
    rule.refresh_from_db()
    assert rule.enabled is False
    assert api.patch(f"/api/v1/rules/{rule.pk}/", {"enabled": "true"}, format="multipart").status_code == 200
    rule.refresh_from_db()
    assert rule.enabled is True
