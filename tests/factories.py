"""The tests' one set of factories: a governed rule, an alert as the evaluator leaves it, a logged-in client.

Defaults describe a plausible rule of each kind (a band on the loss, a non-finite rule on gradients, …);
a test that cares about a field passes it.
"""
from django.test import Client
from django.utils import timezone

from alerts.models import Alert, AlertChange, ChangeKind, Rule
from alerts.rules import save_rule
from ingest.models import Run

OWNER = "Pretrain on-call <#pretrain-oncall>"

# What differs by kind; every other governance field is shared.
KIND_DEFAULTS = {
    "band": {
        "name": "loss-spike",
        "description": "Training loss above its band.",
        "scope": {"metrics": ["loss"], "component": "", "runs": {"team": "pretrain"}},
        "persistence": {"points": 3, "resolve_points": 10},
        "params": {"direction": "above", "width": 6.0},
        "unit": "σ beyond the band",
    },
    "nonfinite": {"name": "grad-nonfinite", "params": {}, "unit": "non-finite points in a row"},
    "threshold": {"name": "grad-high", "params": {"above": 10.0}, "unit": "above the threshold"},
    "absence": {"name": "missing-data", "params": {"missing_steps": 5}, "unit": "steps missing"},
}
OTHER_KINDS = {"description": "", "scope": {"metrics": ["grad_norm"]}, "persistence": {"points": 1, "resolve_points": 3},
               "params": {}, "unit": ""}


def make_rule(project, name=None, kind="band", *, scope=None, persistence=None, params=None, response="notify",
              user=None, source="test", **fields) -> Rule:
    """A governed rule saved the way every path saves one (alerts/rules.py, a revision row included)."""
    defaults = {**OTHER_KINDS, **KIND_DEFAULTS.get(kind, {"name": f"{kind}-rule"})}
    name = name or defaults["name"]
    rule = Rule(
        project=project, name=name, kind=kind, owner=OWNER, description=defaults["description"],
        scope=defaults["scope"] if scope is None else scope,
        persistence=defaults["persistence"] if persistence is None else persistence,
        params=defaults["params"] if params is None else params,
        diagnostic_url=f"https://runbooks.example/{name}", permitted_response=response, **fields,
    )
    return save_rule(rule, user=user, source=source)


def make_alert(rule, run="run-a", component="layers.3", *, metric=None, state="firing", first_step=10, magnitude=2.0,
               verdict=None, reviewed=False) -> Alert:
    """An alert of `rule` on `run` (a Run, or a run id created in the rule's project) with its "fired" row.

    `reviewed`: a person has looked at it (a resolved hard invariant nobody looked at stays in the inbox's
    default view, alerts/review.py)."""
    if not isinstance(run, Run):
        run, _ = Run.objects.get_or_create(run_id=run, defaults={"project": rule.project})
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule, run=run, component=component, metric=metric or (rule.scope.get("metrics") or [""])[0],
        first_step=first_step, last_step=first_step + 1, fired_step=first_step + 1, magnitude=magnitude,
        magnitude_unit=KIND_DEFAULTS.get(rule.kind, OTHER_KINDS)["unit"], phase="steady", state=state, verdict=verdict,
        fired_at=now, resolved_at=now if state == "resolved" else None, reviewed_at=now if reviewed else None,
    )
    AlertChange.objects.create(alert=alert, kind=ChangeKind.FIRED, step=first_step + 1, at=now)
    return alert


def client_for(user):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client
