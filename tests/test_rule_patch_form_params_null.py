"""`params=null` sent as a form field on a rule PATCH is a 400 naming `params`, never an IntegrityError 500."""
import pytest
from django.test.client import encode_multipart, BOUNDARY, MULTIPART_CONTENT

from alerts.models import Rule, RuleRevision
from tests.factories import make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def rule(project, owner):
    return make_rule(project, user=owner)


@pytest.mark.parametrize("encoding", ["multipart", "urlencoded"])
@pytest.mark.parametrize("value", ["null", "[]", '"wide"'])
def test_patch_with_params_as_a_form_field_that_is_not_an_object(api, owner, rule, encoding, value):
    api.force_login(owner)
    url = f"/api/v1/rules/{rule.pk}/"
    if encoding == "multipart":
        response = api.generic("PATCH", url, encode_multipart(BOUNDARY, {"params": value}), content_type=MULTIPART_CONTENT)
    else:
        response = api.generic("PATCH", url, f"params={value}", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["errors"]] == ["params"]
    assert Rule.objects.get(pk=rule.pk).params == {"direction": "above", "width": 6.0}
    assert RuleRevision.objects.filter(rule=rule).count() == 1


def test_patch_with_valid_params_as_a_form_field_still_saves(api, owner, rule):
    api.force_login(owner)
    response = api.generic("PATCH", f"/api/v1/rules/{rule.pk}/", encode_multipart(BOUNDARY, {"params": '{"width": 8}'}),
                           content_type=MULTIPART_CONTENT)
    assert response.status_code == 200, response.content
    assert Rule.objects.get(pk=rule.pk).params == {"width": 8}
