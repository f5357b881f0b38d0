"""Alerts to act on, and an on-call member, for the triage, mute and inbox tests."""
import pytest
from django.utils import timezone

from alerts.models import Alert, AlertChange, ChangeKind, Rule
from alerts.rules import save_rule
from ingest.models import Run
from opsconsole.models import Membership, Role

OWNER = "Pretrain on-call <#pretrain-oncall>"


# Kinds whose params need a value to be valid (alerts/params.py): a plain example of each.
EXAMPLE_PARAMS = {"threshold": {"above": 10.0}, "absence": {"missing_steps": 5}}


def make_rule(project, name="grad-nonfinite", kind="nonfinite", scope=None, persistence=None, response="notify"):
    return save_rule(
        Rule(project=project, name=name, kind=kind, owner=OWNER, scope=scope or {"metrics": ["grad_norm"]},
             persistence=persistence or {"points": 1, "resolve_points": 3},
             diagnostic_url=f"https://runbooks.example/{name}", permitted_response=response,
             params=EXAMPLE_PARAMS.get(kind, {})),
        source="test",
    )


def make_alert(rule, run_id="run-a", component="layers.3", state="firing", first_step=10, magnitude=2.0, reviewed=False):
    """An alert as the evaluator leaves it: the alert and its "fired" row (`reviewed`: a person has looked at it,
    which keeps a resolved hard invariant out of the inbox's default view)."""
    run, _ = Run.objects.get_or_create(run_id=run_id, defaults={"project": rule.project})
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule, run=run, component=component, metric="grad_norm", first_step=first_step, last_step=first_step + 1,
        fired_step=first_step + 1, magnitude=magnitude, magnitude_unit="non-finite points in a row", phase="steady",
        state=state, fired_at=now, resolved_at=now if state == "resolved" else None, reviewed_at=now if reviewed else None,
    )
    AlertChange.objects.create(alert=alert, kind=ChangeKind.FIRED, step=first_step + 1, at=now)
    return alert


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
    return make_rule(project)


@pytest.fixture
def alert(rule):
    return make_alert(rule)
