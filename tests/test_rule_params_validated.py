"""Each kind's `params` are checked on every path, as the governance fields are.

Types, ranges and unknown keys: the model, the REST API (create, update,
partial update), the console form, the admin and rules as code refuse the same
values, each message on `params.<key>` (on the form's params field, naming the
key), and store nothing. The docs' list of params (docs/alerting.md) is the validator's own.
"""
import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from alerts import params as rule_params
from alerts.describe import KIND_PARAMS
from alerts.models import Rule, RuleRevision
from alerts.rules import save_rule
from alerts.starter import STARTER_RULES

pytestmark = pytest.mark.django_db
RULES_DOC = Path(__file__).resolve().parent.parent / "docs" / "alerting.md"

# (kind, params, the key the message is on)
BAD = [
    ("band", {"width": "wide"}, "width"),
    ("band", {"width": 0}, "width"),
    ("band", {"width": -3.5}, "width"),
    ("band", {"direction": "up"}, "direction"),
    ("band", {"window": 2.5}, "window"),
    ("band", {"window": 10, "min_history": 20}, "min_history"),
    ("band", {"min_history": 1}, "min_history"),
    ("band", {"rel_floor": None}, "rel_floor"),
    ("band", {"restore_tolerance": [0.25]}, "restore_tolerance"),
    ("band", {"settle_steps": -1}, "settle_steps"),
    ("band", {"colour": "red"}, "colour"),
    ("threshold", {"above": "x"}, "above"),
    ("threshold", {"above": True}, "above"),
    ("threshold", {"below": 5, "above": 1}, "below"),
    ("threshold", {}, "above"),  # neither bound: a threshold that can never fire
    ("threshold", {"above": 1, "settle_steps": 1.5}, "settle_steps"),
    ("absence", {"seconds": 0}, "seconds"),
    ("absence", {"missing_steps": 1.5}, "missing_steps"),
    ("absence", {}, "missing_steps"),
    ("event", {"min_magnitude": {"value": 1}}, "min_magnitude"),
    ("divergence", {"evaluations": 0}, "evaluations"),
    ("divergence", {"training": ""}, "training"),
    ("divergence", {"min_rise": "a lot"}, "min_rise"),
    ("nonfinite", {"width": 6}, "width"),
    ("band", {"scale": "log"}, "scale"),
    ("band", {"max_ratio": 3}, "max_ratio"),  # a cap on a ratio band, given to a linear one
    ("band", {"scale": "ratio", "max_ratio": 1}, "max_ratio"),
    ("band", {"persistence_seconds": -1}, "persistence_seconds"),
    ("threshold", {"above": 1, "persistence_seconds": "30 s"}, "persistence_seconds"),
    ("weight_jump", {"min_ratio": 1}, "min_ratio"),
    ("weight_jump", {"allowance": 0}, "allowance"),
    ("weight_jump", {"window": 10, "min_history": 20}, "min_history"),
    ("divergence", {"fast_rise": 0}, "fast_rise"),
]
IDS = [f"{kind}-{key}-{json.dumps(params)}" for kind, params, key in BAD]


def rule_data(kind, params, **overrides):
    data = {
        "project": "pretrain",
        "name": "loss-rule",
        "kind": kind,
        "owner": "Pretrain on-call <#pretrain-oncall>",
        "scope": {"metrics": ["loss"]},
        "persistence": {"points": 3},
        "diagnostic_url": "https://runbooks.example/loss",
        "permitted_response": "notify",
        "params": params,
    }
    data.update(overrides)
    return data


def good_params(kind):
    return {"threshold": {"above": 10.0}, "absence": {"missing_steps": 5}}.get(kind, {})


def model_rule(project, kind, params):
    data = rule_data(kind, params)
    data.pop("project")
    return Rule(project=project, **data)


@pytest.fixture
def admin_api(api, owner):
    api.force_login(owner)  # rule admin of "pretrain"
    return api


def paths(response):
    return {e["path"]: e["message"] for e in response.json()["errors"]}


# --- the model ------------------------------------------------------------------

@pytest.mark.parametrize("kind, params, key", BAD, ids=IDS)
def test_model_validation_names_the_param(project, kind, params, key):
    with pytest.raises(ValidationError) as caught:
        save_rule(model_rule(project, kind, params), source="test")
    messages = caught.value.message_dict
    assert f"params.{key}" in messages, messages
    assert key in messages[f"params.{key}"][0]
    assert not Rule.objects.exists()


@pytest.mark.parametrize("value", [None, [], "wide", 6])
def test_params_must_be_an_object(project, value):
    with pytest.raises(ValidationError) as caught:
        save_rule(model_rule(project, "band", value), source="test")
    assert "JSON object" in caught.value.message_dict["params"][0]


def test_non_finite_and_oversized_numbers_are_refused(project):
    for params, key in [({"above": float("nan")}, "above"), ({"below": float("-inf")}, "below"),
                        ({"above": 10**400}, "above"), ({"window": 10**30}, "window")]:
        kind = "band" if key == "window" else "threshold"
        with pytest.raises(ValidationError) as caught:
            save_rule(model_rule(project, kind, params), source="test")
        assert f"params.{key}" in caught.value.message_dict, params


def test_many_unknown_keys_are_named_but_bounded(project):
    params = {f"key{i}": i for i in range(5000)}
    with pytest.raises(ValidationError) as caught:
        save_rule(model_rule(project, "band", params), source="test")
    messages = caught.value.message_dict
    assert "params.key0" in messages and len(messages) <= rule_params.MAX_UNKNOWN_REPORTED + 1
    assert "4980 more" in messages["params"][0]


def test_valid_params_of_every_kind_are_accepted_and_stored_as_given(project):
    for kind, params in [
        ("band", {"direction": "below", "width": 3, "window": 50, "min_history": 10, "rel_floor": 0.0,
                  "settle_steps": 0, "restore_window": 20, "restore_tolerance": 0.5, "reference_window": 10,
                  "adapt_after": 30}),
        ("threshold", {"below": 0.1, "above": 2.0, "settle_steps": 10}),
        ("absence", {"missing_steps": 0, "seconds": 60.5}),
        ("event", {"min_magnitude": -1}),
        ("divergence", {"training": "train/loss", "evaluations": 1, "min_rise": 0}),
        ("nonfinite", {}),
    ]:
        rule = save_rule(Rule(**{**rule_data(kind, params, name=f"{kind}-rule"), "project": project}),
                         source="test")
        assert Rule.objects.get(pk=rule.pk).params == params


def test_the_starter_pack_validates():
    for spec in STARTER_RULES:
        assert rule_params.params_errors(spec["kind"], spec.get("params", {})) == {}, spec["name"]


# --- the REST API -----------------------------------------------------------------

@pytest.mark.parametrize("kind, params, key", BAD, ids=IDS)
def test_api_create_is_a_400_naming_the_param(admin_api, kind, params, key):
    response = admin_api.post("/api/v1/rules/", rule_data(kind, params), format="json")
    assert response.status_code == 400, response.content
    errors = paths(response)
    assert f"params.{key}" in errors and key in errors[f"params.{key}"]
    assert not Rule.objects.exists() and not RuleRevision.objects.exists()


@pytest.mark.parametrize("kind, params, key", BAD, ids=IDS)
def test_api_update_and_partial_update_are_400s_and_change_nothing(admin_api, kind, params, key):
    created = admin_api.post("/api/v1/rules/", rule_data(kind, good_params(kind)), format="json")
    assert created.status_code == 201, created.content
    url = f"/api/v1/rules/{created.json()['id']}/"
    patched = admin_api.patch(url, {"params": params}, format="json")
    assert patched.status_code == 400 and f"params.{key}" in paths(patched)
    put = admin_api.put(url, rule_data(kind, params), format="json")
    assert put.status_code == 400 and f"params.{key}" in paths(put)
    assert Rule.objects.get().params == good_params(kind)
    assert RuleRevision.objects.count() == 1


def test_api_refuses_a_number_json_cannot_hold_as_a_finite_value(admin_api):
    body = json.dumps(rule_data("threshold", {})).replace('"params": {}', '"params": {"above": 1e400}')
    response = admin_api.generic("POST", "/api/v1/rules/", body, content_type="application/json")
    assert response.status_code == 400 and {"params", "params.above"} & set(paths(response))


def test_the_issue_reproduction_is_now_a_400(admin_api):
    """A band rule with a word for its width, a threshold with a word for its bound: both were 201."""
    band = admin_api.post("/api/v1/rules/", rule_data("band", {"width": "wide"}, name="loss-band"), format="json")
    threshold = admin_api.post("/api/v1/rules/", rule_data("threshold", {"above": "x"}, name="loss-high"), format="json")
    assert (band.status_code, threshold.status_code) == (400, 400)
    assert paths(band) == {"params.width": paths(band)["params.width"]}
    assert "number" in paths(band)["params.width"] and "number" in paths(threshold)["params.above"]


# --- the console form ---------------------------------------------------------------

def console_form(kind, params, **overrides):
    data = {key: json.dumps(value) if isinstance(value, (dict, list)) else value
            for key, value in rule_data(kind, params).items()}
    data.update(enabled="on", description="")
    data.update(overrides)
    return data


@pytest.mark.parametrize("kind, params, key", BAD, ids=IDS)
def test_console_form_puts_the_message_on_params_naming_the_key(client, owner, kind, params, key):
    client.force_login(owner)
    response = client.post("/rules/new/", console_form(kind, params))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "params" in errors and any(key in message for message in errors["params"]), errors
    assert not Rule.objects.exists()


def test_console_edit_is_refused_and_the_rule_kept(client, owner, project):
    rule = save_rule(model_rule(project, "band", {"width": 6.0}), source="test")
    client.force_login(owner)
    response = client.post(f"/rules/{rule.pk}/edit/", console_form("band", {"width": "wide"}, name="loss-rule"))
    assert response.status_code == 200 and "width" in response.context["form"].errors["params"][0]
    assert Rule.objects.get().params == {"width": 6.0}


def test_console_form_lists_each_kinds_params_from_the_validator(client, owner):
    client.force_login(owner)
    html = client.get("/rules/new/").content.decode()
    for kind in rule_params.KIND_PARAMS:
        for param in rule_params.KIND_PARAMS[kind]:
            assert f"&quot;{param.name}&quot;" in html or f'"{param.name}"' in html, (kind, param.name)
    assert KIND_PARAMS == {kind: rule_params.describe_kind(kind) for kind in rule_params.KIND_PARAMS}


# --- the admin ------------------------------------------------------------------------

@pytest.mark.parametrize("kind, params, key", [BAD[0], BAD[11], BAD[10]], ids=[IDS[0], IDS[11], IDS[10]])
def test_admin_form_refuses_bad_params_on_the_params_field(client, django_user_model, project, kind, params, key):
    admin = django_user_model.objects.create_superuser("root", password="pw-root")
    client.force_login(admin)
    data = rule_data(kind, params)
    data.update(project=project.pk, scope=json.dumps(data["scope"]), persistence=json.dumps(data["persistence"]),
                params=json.dumps(params), enabled="on")
    response = client.post("/admin/alerts/rule/add/", data)
    assert response.status_code == 200  # the form again, with the error
    errors = response.context["adminform"].form.errors
    assert any(key in message for message in errors["params"]), errors
    assert not Rule.objects.exists()
    data["params"] = json.dumps(good_params(kind))
    assert client.post("/admin/alerts/rule/add/", data).status_code == 302


def test_admin_refuses_null_params(client, django_user_model, project):
    admin = django_user_model.objects.create_superuser("root", password="pw-root")
    client.force_login(admin)
    data = rule_data("band", {})
    data.update(project=project.pk, scope=json.dumps(data["scope"]), persistence=json.dumps(data["persistence"]),
                params="null", enabled="on")
    response = client.post("/admin/alerts/rule/add/", data)
    assert response.status_code == 200 and "params" in response.context["adminform"].form.errors
    assert not Rule.objects.exists()


# --- rules as code -----------------------------------------------------------------------

@pytest.mark.parametrize("kind, params, key", BAD, ids=IDS)
def test_load_rules_names_the_param_and_saves_nothing(project, tmp_path, kind, params, key):
    good = rule_data("nonfinite", {}, name="first")
    path = tmp_path / "rules.yaml"
    path.write_text(json.dumps({"rules": [good, rule_data(kind, params)]}))  # JSON is YAML
    with pytest.raises(CommandError, match=rf"rules\[1\]\.params\.{re.escape(key)}: "):
        call_command("load_rules", str(path), stdout=StringIO())
    with pytest.raises(CommandError, match=rf"rules\[1\]\.params\.{re.escape(key)}: "):
        call_command("load_rules", str(path), "--check", stdout=StringIO())
    assert not Rule.objects.exists()


# --- one source: the docs list what the validator checks -----------------------------------

def test_docs_list_each_kinds_params_as_the_validator_defines_them():
    assert rule_params.reference_table() in RULES_DOC.read_text()
