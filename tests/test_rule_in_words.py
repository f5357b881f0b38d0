"""The rule detail page reads a rule out in words: scope, persistence, kind, and what each revision changed."""
from html import unescape

import pytest

from alerts.describe import kind_words, persistence_words, scope_rows
from alerts.rules import save_rule
from tests.factories import client_for, make_rule


def test_persistence_in_words():
    assert persistence_words({"points": 3, "resolve_points": 10}) == "fires after 3 points in a row; resolves after 10 clear points in a row"
    assert persistence_words({"points": 1}) == "fires on the first point; resolves on the first clear point"
    assert persistence_words({"steps": 200, "resolve_points": 5}).startswith("fires once the condition has held for 200 steps")
    assert persistence_words({"seconds": 900}).startswith("fires once the condition has held for 900 s (15 min)")
    assert persistence_words({"points": 1, "resolve_points": 10, "until_reviewed": True}).endswith(
        "resolves after 10 clear points in a row, then waits for a person (needs review)")


def test_until_reviewed_must_be_true_or_false():
    from alerts.governance import judging_errors

    assert judging_errors(kind="band", scope={"metrics": ["update_ratio"]}, params={},
                          persistence={"points": 1, "until_reviewed": True}) == {}
    assert judging_errors(kind="band", scope={"metrics": ["update_ratio"]}, params={},
                          persistence={"points": 1, "until_reviewed": 1}) == {
        "persistence": "persistence.until_reviewed must be true or false"}


def test_scope_in_words():
    rows = {row["label"]: row for row in scope_rows({"metrics": ["grad_norm"], "component": "blocks.*", "layer": "attention"}, "band")}
    assert rows["Metrics"]["values"] == ["grad_norm"]
    assert rows["Components"]["values"] == ["blocks.*"]
    assert rows["Layer"]["values"] == ["attention"]
    assert rows["Phases"]["text"] == "all except" and "warmup" in rows["Phases"]["values"]  # a band's default skips
    assert rows["Runs"]["text"] == "every run of the project"
    rows = {row["label"]: row for row in scope_rows({"conditions": ["oom"], "phases": ["steady"], "runs": {"team": "x"}}, "event")}
    assert rows["Event conditions"]["values"] == ["oom"]
    assert rows["Components"]["text"] == "every component, and the run as a whole"
    assert (rows["Phases"]["text"], rows["Phases"]["values"]) == ("only", ["steady"])
    assert rows["Runs"]["values"] == ["team=x"]
    rows = {row["label"]: row for row in scope_rows({"metrics": ["loss"]}, "nonfinite")}
    assert rows["Phases"]["text"] == "all phases"


def test_kind_in_words():
    assert kind_words("threshold", {"above": 0.99}) == "a value is above 0.99"
    assert kind_words("band", {"direction": "above", "width": 6.0}) == "a value is above its phase-aware band (6 robust σ wide)"
    assert kind_words("absence", {"missing_steps": 5, "seconds": 900}) == (
        "more than 5 steps are missing in a row or more than 900 s (15 min) pass without a point"
    )


@pytest.mark.django_db
def test_the_detail_shows_each_revision_newest_first_with_what_changed(owner, project):
    rule = make_rule(project, user=owner)
    rule.persistence = {"points": 5, "resolve_points": 10}
    save_rule(rule, user=owner, source="api")
    save_rule(rule, user=None, source="load_rules")
    html = unescape(client_for(owner).get(f"/rules/{rule.pk}/").content.decode())
    history = html[html.index('id="rule-history"'):]
    assert history.index(">load_rules<") < history.index(">api<") < history.index(">test<")  # newest first
    assert "olivia" in history
    assert '<strong>persistence</strong>: <del>points 3; resolve points 10</del> → <ins>points 5; resolve points 10</ins>' in history
    assert "saved without changes" in history and "first revision recorded" in history
