"""Fixtures for the triage, mute and inbox tests: an on-call member, a rule and an alert to act on (tests/factories.py)."""
import pytest

from alerts.models import AlertChange, ChangeKind
from opsconsole.models import Membership, Role
from tests.factories import make_alert, make_rule


def triage_rows(alert=None):
    """The rows people and mutes wrote (everything but the evaluator's fired/extended rows)."""
    rows = AlertChange.objects.exclude(kind__in=[ChangeKind.FIRED, ChangeKind.EXTENDED])
    if alert is not None:
        rows = rows.filter(alert=alert)
    return rows.order_by("id")


@pytest.fixture
def oncall(django_user_model, project):
    user = django_user_model.objects.create_user("omar", password="pw-omar")
    Membership.objects.create(user=user, project=project, role=Role.ONCALL)
    return user


@pytest.fixture
def rule(project):
    return make_rule(project, kind="nonfinite")


@pytest.fixture
def alert(rule):
    return make_alert(rule)
