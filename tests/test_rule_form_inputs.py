"""The rule form's labelled inputs for scope, persistence and each kind's settings: what they save, their errors
in words, the edit page filled from the rule, and the JSON boxes that win over them when used."""
import json
from html import unescape

import pytest

from alerts.models import Rule, RuleRevision
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


def inputs(**overrides):
    """A threshold rule typed into the inputs; the JSON boxes left empty, as a person leaves them."""
    data = {
        "name": "grad-high", "project": "pretrain", "kind": "threshold", "description": "", "enabled": "on",
        "owner": "Pretrain on-call <#pretrain-oncall>", "diagnostic_url": "https://runbooks.example/grad",
        "permitted_response": "notify",
        "scope_metrics": "grad_norm, grad_norm_*", "scope_components": "matching", "scope_component": "blocks.*",
        "scope_layer": "", "scope_phases": "steady", "scope_runs": "team=pretrain, size=7b",
        "persistence_count": "3", "persistence_unit": "points", "persistence_resolve_points": "10",
        "param_threshold_above": "10", "param_threshold_settle_steps": "20",
        "scope": "", "persistence": "", "params": "",
    }
    data.update(overrides)
    return data


def field_block(html, name):
    """The rendered block of one field (its label, input, errors and help)."""
    html = unescape(html)
    block = html[html.index(f'id="field-{name}"'):]
    return block[:block.index('<div class="field', 1)] if '<div class="field' in block[1:] else block


def test_a_rule_typed_into_the_inputs_is_saved_as_its_json(owner):
    response = client_for(owner).post("/rules/new/", inputs())
    assert response.status_code == 302, response.context["form"].errors
    rule = Rule.objects.get()
    assert rule.scope == {"metrics": ["grad_norm", "grad_norm_*"], "phases": ["steady"], "component": "blocks.*",
                          "runs": {"team": "pretrain", "size": "7b"}}
    assert rule.persistence == {"points": 3, "resolve_points": 10}
    assert rule.params == {"above": 10, "settle_steps": 20}


def test_only_the_chosen_kinds_settings_are_read(owner):
    # Without the script every kind's settings are on the page: a band's left filled in is not a threshold's.
    response = client_for(owner).post("/rules/new/", inputs(param_band_width="not a number", param_band_direction="up"))
    assert response.status_code == 302
    assert Rule.objects.get().params == {"above": 10, "settle_steps": 20}


@pytest.mark.parametrize("field, value, message", [
    ("param_band_min_history", "1", "Band settings → min history: must be a whole number from 2 to 10000, not “1”"),
    ("param_band_width", "-1", "Band settings → width: must be a finite number > 0, not “-1”"),
    ("param_band_direction", "sideways", "Band settings → direction: must be one of above, below, both"),
    ("persistence_count", "0", "Persistence → fire after: must be a whole number of points ≥ 1, not “0”"),
    ("persistence_count", "2.5", "Persistence → fire after: must be a whole number of points ≥ 1"),
    ("persistence_resolve_points", "many", "Persistence → resolve after: must be a whole number of clear points ≥ 1"),
    ("scope_runs", "pretrain", "Scope → run tags: write each tag as key=value"),
])
def test_a_bad_input_is_refused_naming_it_in_words_and_nothing_is_saved(owner, field, value, message):
    data = inputs(kind="band", param_threshold_above="", param_threshold_settle_steps="", **{field: value})
    response = client_for(owner).post("/rules/new/", data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field] and errors[field][0].startswith(message), errors
    assert message in field_block(response.content.decode(), field)  # beside the input, on the page
    assert "_" not in errors[field][0].split(":")[0]  # the field in words, never its key
    assert not Rule.objects.exists() and not RuleRevision.objects.exists()


def test_what_a_kind_needs_of_its_settings_together_is_said_in_words_on_the_input(owner):
    data = inputs(kind="band", param_band_window="20", param_band_min_history="50")
    response = client_for(owner).post("/rules/new/", data)
    errors = response.context["form"].errors
    assert errors["param_band_min_history"] == ["Band settings → min history: min history must be at most window"]
    response = client_for(owner).post("/rules/new/", inputs(param_threshold_above=""))
    assert response.context["form"].errors["param_threshold_above"] == [
        "Threshold settings → above: a threshold rule needs above, below or both"]
    assert not Rule.objects.exists()


def test_fire_after_is_required_once_persistence_is_begun(owner):
    response = client_for(owner).post("/rules/new/", inputs(persistence_count=""))
    assert response.context["form"].errors == {
        "persistence_count": ["Persistence → fire after: required: how many points before the rule fires"]}
    assert not Rule.objects.exists()


def test_the_edit_page_fills_the_inputs_from_the_saved_rule_and_saving_it_unchanged_keeps_it(owner, project):
    rule = make_rule(project, persistence={"seconds": 90, "resolve_points": 10, "until_reviewed": True},
                     params={"direction": "above", "width": 6.0, "min_history": 30})
    client = client_for(owner)
    response = client.get(f"/rules/{rule.pk}/edit/")
    form = response.context["form"]
    shown = {name: form[name].value() for name in (
        "scope_metrics", "scope_components", "scope_component", "scope_runs", "persistence_count", "persistence_unit",
        "persistence_resolve_points", "persistence_until_reviewed", "param_band_direction", "param_band_width",
        "param_band_min_history", "param_band_window", "scope", "persistence", "params")}
    assert shown == {
        "scope_metrics": "loss", "scope_components": "run", "scope_component": "", "scope_runs": "team=pretrain",
        "persistence_count": "90", "persistence_unit": "seconds", "persistence_resolve_points": "10",
        "persistence_until_reviewed": True, "param_band_direction": "above", "param_band_width": "6",
        "param_band_min_history": "30", "param_band_window": None, "scope": None, "persistence": None, "params": None,
    }
    html = response.content.decode()
    assert 'name="param_band_width" value="6"' in field_block(html, "param_band_width")
    assert '<details class="panel rule-json" id="rule-json">' in html  # JSON closed: the inputs say it all

    data = {key: value for key, value in form.initial.items() if value not in (None, False)}
    data.update(project="pretrain", enabled="on", persistence_until_reviewed="on", name=rule.name)
    before = rule.snapshot()
    assert client.post(f"/rules/{rule.pk}/edit/", data).status_code == 302
    rule.refresh_from_db()
    assert rule.snapshot() == before


def test_a_json_box_with_anything_in_it_wins_over_its_inputs(owner):
    data = inputs(scope='{"metrics": ["loss"]}', params='{"below": 0.5}')
    assert client_for(owner).post("/rules/new/", data).status_code == 302
    rule = Rule.objects.get()
    assert rule.scope == {"metrics": ["loss"]} and rule.params == {"below": 0.5}
    assert rule.persistence == {"points": 3, "resolve_points": 10}  # its box empty: the inputs


def test_a_stored_value_the_inputs_cannot_say_stays_in_its_json_box(owner, project):
    rule = make_rule(project, scope={"metrics": ["loss", "a,b"]})  # a comma in a name: inputs would split it
    response = client_for(owner).get(f"/rules/{rule.pk}/edit/")
    form = response.context["form"]
    assert json.loads(form["scope"].value()) == {"metrics": ["loss", "a,b"]} and not form["scope_metrics"].value()
    assert form["persistence"].value() is None and form["persistence_count"].value() == "3"
    assert '<details class="panel rule-json" id="rule-json" open>' in response.content.decode()

    data = {key: value for key, value in form.initial.items() if value not in (None, False)}
    data.update(project="pretrain", enabled="on", scope=form["scope"].value(), description="edited")
    assert client_for(owner).post(f"/rules/{rule.pk}/edit/", data).status_code == 302
    rule.refresh_from_db()
    assert rule.scope == {"metrics": ["loss", "a,b"]} and rule.description == "edited"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("diagnostic_url", "", "Diagnostic URL is required: the runbook or dashboard to open first"),
    ("diagnostic_url", "runbooks/grad", "Diagnostic URL must be an http(s) URL"),
    ("permitted_response", "", "Permitted response is required: one of observe, notify"),
    ("owner", "", "Owner is required: a person or team with a contact"),
])
def test_an_empty_or_wrong_governance_field_is_named_in_words(owner, field, value, message):
    # The form once showed the API's key: "diagnostic_url is required: …", "permitted_response is required: …".
    response = client_for(owner).post("/rules/new/", inputs(**{field: value}))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field] and errors[field][0].startswith(message), errors
    assert message in field_block(response.content.decode(), field)
    assert not Rule.objects.exists()
