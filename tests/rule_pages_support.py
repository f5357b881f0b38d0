"""Shared by tests/test_rules_pages*.py and test_rule_*: a governed rule, a logged-in client, an alert."""
from django.test import Client
from django.utils import timezone

from alerts.models import Alert, Rule
from alerts.rules import save_rule

GOVERNED = {
    "kind": "band",
    "description": "Training loss above its band.",
    "owner": "Pretrain on-call <#pretrain-oncall>",
    "scope": {"metrics": ["loss"], "component": "", "runs": {"team": "pretrain"}},
    "persistence": {"points": 3, "resolve_points": 10},
    "diagnostic_url": "https://runbooks.example/loss-spike",
    "permitted_response": "notify",
    "params": {"direction": "above", "width": 6.0},
}


def make_rule(project, name="loss-spike", user=None, source="test", **overrides):
    return save_rule(Rule(project=project, name=name, **{**GOVERNED, **overrides}), user=user, source=source)


def client_for(user):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def make_alert(rule, run, n, verdict=None, state="resolved"):
    """Alert number n of the rule on the run (component blocks.n, steps 10n…10n+2)."""
    return Alert.objects.create(
        rule=rule, run=run, component=f"blocks.{n}", metric="loss", first_step=10 * n, last_step=10 * n + 2,
        fired_step=10 * n + 2, magnitude=7.5, magnitude_unit="σ beyond the band", state=state, verdict=verdict,
        fired_at=timezone.now(),
    )
