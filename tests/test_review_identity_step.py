"""Step 1 of a review: who the run is, what changed since the last review, and its config against the comparison run."""
import json

import pytest

from ingest.models import Run
from reviews.steps import fill
from reviews.steps.identity import identity
from reviews.steps.shared import default_comparison
from tests.review_support import open_review, send, series

pytestmark = pytest.mark.django_db

BASE = {"optim": {"lr": 0.0003, "betas": [0.9, 0.95]}, "batch_size": 512, "model": {"layers": 24}}


def loss(steps):
    return series("loss", steps, [3.0 - s / 1000 for s in steps])


def make_reference(sender, config=BASE):
    send(sender, {"id": "ref", "config": config}, loss(range(0, 100)))
    Run.objects.filter(run_id="ref").update(reference=True)


def test_several_config_keys_changed_against_the_reference_asks_for_attention_key_by_key(sender):
    make_reference(sender)
    changed = {"optim": {"lr": 0.0006, "betas": [0.9, 0.95], "warmup": 2000}, "model": {"layers": 24}}
    send(sender, {"id": "new", "config": changed, "code_rev": "abc123", "data_snapshot": "corpus-1",
                  "budget": {"steps": 10000}, "tags": {"team": "pretrain"}}, loss(range(0, 50)),
         phases=[{"step": 0, "phase": "steady"}])
    step = identity(open_review("new"))
    assert step["state"] == "attention"
    assert "several variables at once" in step["summary"] and "3 config keys" in step["summary"]
    diff = {r["key"]: (r["change"], r["run"], r["comparison"]) for r in step["findings"]["sections"][1]["rows"]}
    assert diff == {
        "batch_size": ("removed", None, "512"),
        "optim.lr": ("changed", "0.0006", "0.0003"),
        "optim.warmup": ("added", "2000", None),
    }
    assert step["findings"]["comparison"] == "ref"
    shown = {r["field"]: r["value"] for r in step["findings"]["rows"]}
    assert shown["run id"] == "new" and shown["code rev"] == "abc123" and shown["data snapshot"] == "corpus-1"
    assert shown["budget"] == "10,000 steps" and shown["phase"] == "steady since step 0" and shown["attempt"] == "1"
    assert any(e["href"] == "/runs/ref/" for e in step["evidence"])
    json.dumps(step, allow_nan=False)


def test_one_changed_variable_is_a_clean_comparison(sender):
    make_reference(sender)
    send(sender, {"id": "new", "config": {**BASE, "batch_size": 1024}}, loss(range(0, 50)))
    step = identity(open_review("new"))
    assert step["state"] == "pass"
    assert [r["key"] for r in step["findings"]["sections"][1]["rows"]] == ["batch_size"]


def test_the_reviewer_chosen_comparison_replaces_the_reference(sender):
    make_reference(sender)
    send(sender, {"id": "sibling", "config": {**BASE, "batch_size": 1024}}, loss(range(0, 20)))
    send(sender, {"id": "new", "config": {**BASE, "batch_size": 1024}}, loss(range(0, 50)))
    review = open_review("new", comparison=Run.objects.get(run_id="sibling"))
    step = identity(review)
    assert step["findings"]["comparison"] == "sibling" and step["findings"]["config_keys_differing"] == 0
    assert default_comparison(Run.objects.get(run_id="new")).run_id == "ref"
    assert default_comparison(Run.objects.get(run_id="ref")) is None  # never itself


def test_identity_changes_since_the_last_review_are_highlighted(sender):
    send(sender, {"id": "new", "code_rev": "aaa", "config": {"lr": 0.1}}, loss(range(0, 10)))
    send(sender, {"id": "new", "code_rev": "bbb", "config": {"lr": 0.1}}, loss(range(10, 20)))  # before the first review
    first = open_review("new")
    send(sender, {"id": "new", "code_rev": "bbb", "config": {"lr": 0.05}}, loss(range(20, 30)))
    step = identity(open_review("new", previous=first))
    assert step["state"] == "attention"
    assert "identity changed since the last review: config (at step 20)" in step["summary"].lower()
    changes = [(r["field"], r["step"], r["highlight"]) for r in step["findings"]["sections"][0]["rows"]]
    assert changes == [("code rev", 10, False), ("config", 20, True)]
    highlighted = {r["field"] for r in step["findings"]["rows"] if r.get("highlight")}
    assert highlighted == {"config"}
    assert step["findings"]["comparison"] is None  # no reference run in the project: said, not an attention


def test_a_run_with_nothing_changed_and_no_reference_passes(sender):
    send(sender, {"id": "plain", "code_rev": "aaa"}, loss(range(0, 10)))
    first = open_review("plain")
    send(sender, {"id": "plain"}, loss(range(10, 20)))
    steps = fill(open_review("plain", previous=first))
    assert steps[0]["number"] == 1 and steps[0]["state"] == "pass"
    assert "no reference run" in steps[0]["summary"]
