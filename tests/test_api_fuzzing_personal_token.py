"""Schemathesis with every check against the API, authenticated with a rule admin's personal token (tests/api_fuzzing_support.py)."""
import pytest

from tests.api_fuzzing_support import assert_every_operation_answers_as_documented, seeded  # noqa: F401  (fixture)

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_every_operation_answers_as_documented(live_server, seeded, settings):  # noqa: F811
    assert_every_operation_answers_as_documented(live_server, seeded["personal"], settings)
