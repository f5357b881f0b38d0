"""The governance rules every alert rule must satisfy, in one place.

Model validation, the REST API, the admin and console forms and rules-as-code
all call `governance_errors`; the database adds CHECK constraints on top, so no
path can store a rule without an owner, a scope, a persistence rule, a
diagnostic link and a permitted response.
"""
import re

from alerts.params import params_errors

GOVERNANCE_FIELDS = ("owner", "scope", "persistence", "diagnostic_url", "permitted_response")

KINDS = ("nonfinite", "threshold", "band", "absence", "event", "divergence", "weight_jump", "reference")
RESPONSES = ("observe", "notify", "review", "stop", "rewind")
AUTOMATIC_RESPONSES = ("stop", "rewind")
# Hard invariants: the only rules allowed to act on a job on their own.
HARD_INVARIANT_KINDS = ("nonfinite", "absence")


def sticky(rule) -> bool:
    """Whether the rule's alerts, once their condition clears with nobody looking, wait for a person ("needs
    review"): hard invariants always, any other rule whose persistence says `until_reviewed` (an event whose
    damage outlasts its signal, such as an optimizer's abnormal update)."""
    persistence = getattr(rule, "persistence", None)
    persistence = persistence if isinstance(persistence, dict) else {}
    return rule.kind in HARD_INVARIANT_KINDS or persistence.get("until_reviewed") is True

OWNER_RE = re.compile(r"^\s*[^<>]+?\s*<[^<>]+>\s*$")
SCOPE_KEYS = {"runs", "metrics", "conditions", "component", "layer", "phases"}
PERSISTENCE_KEYS = {"points", "steps", "seconds", "resolve_points", "until_reviewed"}
URL_RE = re.compile(r"^https?://\S+$")


def governance_errors(*, kind, owner, scope, persistence, diagnostic_url, permitted_response) -> dict[str, str]:
    """{field: message} for every governance problem; empty when the rule is governed."""
    errors = {}
    if kind not in KINDS:
        errors["kind"] = f"kind must be one of {', '.join(KINDS)}"
    if not isinstance(owner, str) or not owner.strip():
        errors["owner"] = "owner is required: a person or team with a contact, 'NAME <CONTACT>'"
    elif not OWNER_RE.match(owner):
        errors["owner"] = "owner needs a contact: write it as 'NAME <CONTACT>', e.g. 'Pretrain on-call <#pretrain-oncall>'"
    errors.update(_scope_errors(scope))
    errors.update(_persistence_errors(persistence))
    if not isinstance(diagnostic_url, str) or not diagnostic_url.strip():
        errors["diagnostic_url"] = "diagnostic_url is required: the runbook or dashboard to open first"
    elif not URL_RE.match(diagnostic_url):
        errors["diagnostic_url"] = "diagnostic_url must be an http(s) URL"
    if not isinstance(permitted_response, str) or not permitted_response:
        errors["permitted_response"] = f"permitted_response is required: one of {', '.join(RESPONSES)}"
    elif permitted_response not in RESPONSES:
        errors["permitted_response"] = f"permitted_response must be one of {', '.join(RESPONSES)}"
    elif permitted_response in AUTOMATIC_RESPONSES and kind not in HARD_INVARIANT_KINDS:
        errors["permitted_response"] = (
            f"an automatic {permitted_response!r} is allowed only on hard-invariant rules "
            f"({', '.join(HARD_INVARIANT_KINDS)}), not on {kind!r}"
        )
    return errors


def judging_errors(*, kind, scope, persistence, params) -> dict[str, str]:
    """What evaluation reads from a rule, checked as saving checks it: a row stored before validation
    existed (or written around it) with any of these wrong is recorded as broken, never judged."""
    return {**_scope_errors(scope), **_persistence_errors(persistence), **params_errors(kind, params)}


def _scope_errors(scope) -> dict[str, str]:
    if not isinstance(scope, dict) or not scope:
        return {"scope": "scope is required: which runs, metrics or conditions, components, layer and phases the rule covers"}
    if set(scope) - SCOPE_KEYS:
        return {"scope": f"unknown scope keys {sorted(map(str, set(scope) - SCOPE_KEYS))[:20]}; allowed: {sorted(SCOPE_KEYS)}"}
    for key in ("metrics", "conditions", "phases"):
        names = scope.get(key)
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) and n for n in names)):
            return {"scope": f"scope.{key} must be a list of names"}
    for key in ("component", "layer"):
        if scope.get(key) is not None and not isinstance(scope[key], str):
            return {"scope": f"scope.{key} must be a string"}
    if not isinstance(scope.get("runs", {}), dict):
        return {"scope": "scope.runs must be an object of tags, {\"team\": \"pretrain\"}"}
    if not (scope.get("metrics") or scope.get("conditions")):
        return {"scope": "scope must name metrics or event conditions"}
    return {}


def _persistence_errors(persistence) -> dict[str, str]:
    if not isinstance(persistence, dict) or not persistence:
        return {"persistence": "persistence is required: fire after N points, S steps or T seconds, resolve after M clear points"}
    unknown = set(persistence) - PERSISTENCE_KEYS
    if unknown:
        return {"persistence": f"unknown persistence keys {sorted(unknown)}; allowed: {sorted(PERSISTENCE_KEYS)}"}
    holds = [k for k in ("points", "steps", "seconds") if k in persistence]
    if len(holds) != 1:
        return {"persistence": "persistence needs exactly one of points, steps or seconds"}
    for key, value in persistence.items():
        if key == "until_reviewed":
            if not isinstance(value, bool):
                return {"persistence": "persistence.until_reviewed must be true or false"}
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            return {"persistence": f"persistence.{key} must be a number > 0"}
        if key in ("points", "steps", "resolve_points") and value != int(value):
            return {"persistence": f"persistence.{key} must be a whole number"}
    return {}
