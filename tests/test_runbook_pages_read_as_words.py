"""A starter rule's runbook page says what the rule watches and when it fires in words, as the rules pages do."""
import html as html_lib

import pytest
from django.test import Client

from alerts import describe
from alerts.starter import STARTER_RULES

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("spec", STARTER_RULES, ids=lambda spec: spec["name"])
def test_the_runbook_shows_scope_and_persistence_in_words(spec):
    response = Client().get(f"/runbooks/{spec['name']}/")
    assert response.status_code == 200
    page = html_lib.unescape(response.content.decode())
    shipped = page[page.index("The rule as shipped"):]
    assert describe.persistence_words(spec["persistence"]).capitalize() in shipped
    assert describe.kind_words(spec["kind"], spec.get("params")) in shipped
    for row in describe.scope_rows(spec["scope"], spec["kind"]):
        assert row["label"] in shipped and all(value in shipped for value in row["values"])
    assert "{'" not in shipped and "': " not in shipped  # no Python dict left
