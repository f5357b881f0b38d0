"""One rule that cannot be judged never takes the batch's other rules with it.

A rule row whose params bypassed validation (saved before it existed), or a
rule that raises for any other reason, is recorded (a row per batch with the
error, logged with its traceback) and skipped; the batch is still marked
evaluated and the other rules' alerts fire; nothing the failing rule did for
that batch is kept. The rule's page, the rules list and the API's rule detail
show it as broken, with the last error and the count, and as recovered once it
judges cleanly again, with its history kept. Run on SQLite and on PostgreSQL
(bin/test runs `both_databases` tests on each).
"""
import logging
import math
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from alerts import evaluation
from alerts.models import Alert, AlertChange, Rule, RuleFault, RuleProgress
from alerts.rules import save_rule
from alerts.silence import alert_silent_runs
from ingest.models import BatchReceipt
from tests.factories import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]
OWNER = "Pretrain on-call <#pretrain-oncall>"


def make_rule(project, name, kind, params, metrics=("loss",), persistence=None):
    return save_rule(
        Rule(project=project, name=name, kind=kind, owner=OWNER, scope={"metrics": list(metrics), "component": ""},
             persistence=persistence or {"points": 1}, diagnostic_url=f"https://runbooks.example/{name}",
             permitted_response="notify", params=params),
        source="test",
    )


@pytest.fixture
def rules(project):
    return {
        "nonfinite-loss": make_rule(project, "nonfinite-loss", "nonfinite", {}),
        "loss-band": make_rule(project, "loss-band", "band", {"direction": "above", "width": 6.0}),
        "loss-high": make_rule(project, "loss-high", "threshold", {"above": 100.0}),
    }


def batch(sender, start, n=60, nan_at=None, high_at=()):
    points = []
    for step in range(start, start + n):
        value = 3.0 - 0.001 * step
        if step == nan_at:
            value = "NaN"
        elif step in high_at:
            value = 500.0
        points.append({"step": step, "metric": "loss", "value": value})
    response = sender.post({"run": {"id": "run-1"}, "points": points})
    assert response.status_code == 202, response.content
    return BatchReceipt.objects.order_by("-id").first()


def fired(rule_name):
    return list(Alert.objects.filter(rule__name=rule_name).values_list("first_step", flat=True))


def health(api, owner, rule):
    api.force_login(owner)
    return api.get(f"/api/v1/rules/{rule.pk}/").json()["health"]


def test_a_band_rule_stored_with_a_word_for_its_width_is_recorded_and_skipped(sender, api, owner, rules, caplog):
    Rule.objects.filter(pk=rules["loss-band"].pk).update(params={"width": "wide"})  # saved before validation existed
    with caplog.at_level(logging.WARNING, logger="alerts.evaluation"):
        receipt = batch(sender, 0, nan_at=30, high_at=(40,))
    receipt.refresh_from_db()
    assert receipt.evaluated_at is not None  # the sweep will not retry it forever
    assert fired("nonfinite-loss") == [30] and fired("loss-high") == [40]
    [fault] = RuleFault.objects.all()
    assert (fault.rule, fault.kind, fault.receipt_id, fault.run.run_id) == (rules["loss-band"], "failed", receipt.pk, "run-1")
    assert "params.width" in fault.error and fault.at is not None
    assert "loss-band" in caplog.text and "params.width" in caplog.text
    assert not RuleProgress.objects.filter(rule=rules["loss-band"]).exists()

    state = health(api, owner, rules["loss-band"])
    assert (state["state"], state["failures"]) == ("broken", 1) and "params.width" in state["last_error"]
    assert health(api, owner, rules["loss-high"]) == {"state": "ok", "failures": 0, "last_error": None,
                                                     "last_failed_at": None, "recovered_at": None}


def test_a_threshold_stored_with_a_word_for_its_bound_spares_the_others(sender, rules):
    Rule.objects.filter(pk=rules["loss-high"].pk).update(params={"above": "x"})
    receipt = batch(sender, 0, nan_at=10)
    receipt.refresh_from_db()
    assert receipt.evaluated_at is not None and fired("nonfinite-loss") == [10]
    assert RuleFault.objects.get().rule == rules["loss-high"]


def test_every_failing_batch_is_counted_and_a_fixed_rule_is_shown_recovered_with_its_history(sender, api, owner, rules):
    band = rules["loss-band"]
    Rule.objects.filter(pk=band.pk).update(params={"width": "wide"})
    batch(sender, 0)
    batch(sender, 60)
    state = health(api, owner, band)
    assert (state["state"], state["failures"]) == ("broken", 2)

    page = client_for(owner).get(f"/rules/{band.pk}/").content.decode()
    assert 'id="rule-health"' in page and "Broken" in page and "params.width" in page
    assert 'id="rule-failures">2<' in page
    listing = client_for(owner).get("/rules/").content.decode()
    row = listing[listing.index(">loss-band<"):listing.index(">loss-high<")]
    assert "broken" in row and "2" in row

    Rule.objects.filter(pk=band.pk).update(params={"direction": "above", "width": 6.0})  # fixed
    batch(sender, 120)
    state = health(api, owner, band)
    assert (state["state"], state["failures"]) == ("recovered", 2) and "params.width" in state["last_error"]
    assert state["recovered_at"] is not None
    batch(sender, 180)  # judged cleanly again: no second "recovered" row
    assert list(RuleFault.objects.filter(rule=band).values_list("kind", flat=True)) == ["failed", "failed", "recovered"]

    page = client_for(owner).get(f"/rules/{band.pk}/").content.decode()
    assert "Recovered" in page and "params.width" in page  # the history stays
    listing = client_for(owner).get("/rules/").content.decode()
    assert "recovered" in listing[listing.index(">loss-band<"):listing.index(">loss-high<")]


def test_a_rule_whose_metric_is_not_in_the_batch_records_nothing(sender, project, rules):
    grad = make_rule(project, "grad-high", "threshold", {"above": 5.0}, metrics=("grad_norm",))
    Rule.objects.filter(pk=grad.pk).update(params={"above": "x"})
    batch(sender, 0)
    assert not RuleFault.objects.exists()


def test_a_rule_that_raises_midway_keeps_nothing_it_did_for_that_batch(sender, api, owner, rules, monkeypatch, caplog):
    """A bug: the threshold rule fires at step 40, then raises at step 45 of the same batch."""
    original = evaluation._Evaluator.persist_point

    def persist_point(self, rule, progress, series, steps, times, flags, i):
        original(self, rule, progress, series, steps, times, flags, i)
        if rule.name == "loss-high" and int(steps[i]) == 45:
            raise ZeroDivisionError("a bug in the rule's code")

    monkeypatch.setattr(evaluation._Evaluator, "persist_point", persist_point)
    with caplog.at_level(logging.ERROR, logger="alerts.evaluation"):
        receipt = batch(sender, 0, nan_at=30, high_at=(40, 41))
    receipt.refresh_from_db()
    assert receipt.evaluated_at is not None
    assert fired("nonfinite-loss") == [30]
    assert fired("loss-high") == [] and not AlertChange.objects.filter(alert__rule__name="loss-high").exists()
    assert not RuleProgress.objects.filter(rule=rules["loss-high"]).exists()
    assert RuleProgress.objects.filter(rule=rules["loss-band"]).exists()  # the others' progress is kept
    fault = RuleFault.objects.get()
    assert fault.rule == rules["loss-high"] and "ZeroDivisionError: a bug in the rule's code" in fault.error
    assert "Traceback" in caplog.text and "ZeroDivisionError" in caplog.text
    assert health(api, owner, rules["loss-high"])["state"] == "broken"


def test_a_database_error_inside_one_rule_leaves_the_transaction_usable(sender, rules, monkeypatch):
    """On PostgreSQL a failed statement aborts the transaction: the rule's work must be rolled back to a savepoint."""
    original = evaluation._Evaluator.fire_or_extend

    def fire_or_extend(self, rule, *args):
        original(self, rule, *args)
        if rule.name == "loss-high":  # a second open alert of the rule on the run: the database refuses it
            Alert.objects.create(rule=rule, run=self.run, component="", first_step=0, last_step=0,
                                 magnitude_unit="", fired_at=self.now)

    monkeypatch.setattr(evaluation._Evaluator, "fire_or_extend", fire_or_extend)
    receipt = batch(sender, 0, nan_at=30, high_at=(40, 41))  # refused at its second point
    receipt.refresh_from_db()
    assert receipt.evaluated_at is not None and fired("nonfinite-loss") == [30] and fired("loss-high") == []
    assert "IntegrityError" in RuleFault.objects.get(rule=rules["loss-high"]).error
    with connection.cursor() as cursor:  # and the transaction is still usable
        cursor.execute("SELECT 1")


def test_an_alert_the_database_refuses_when_the_batch_is_written_takes_out_its_rule_alone(sender, rules, monkeypatch):
    """A batch's alerts are written together after its rules: one refused there is still its rule's fault."""
    original = evaluation._Evaluator.fire_or_extend

    def fire_or_extend(self, rule, *args):
        original(self, rule, *args)
        if rule.name == "loss-high" and not Alert.objects.filter(rule=rule).exists():
            # Written meanwhile by someone else: the open alert the batch's own would be a second of.
            Alert.objects.create(rule=rule, run=self.run, component="", first_step=0, last_step=0,
                                 magnitude_unit="", fired_at=self.now)

    monkeypatch.setattr(evaluation._Evaluator, "fire_or_extend", fire_or_extend)
    receipt = batch(sender, 0, nan_at=30, high_at=range(40, 60))  # still open when the batch is written
    receipt.refresh_from_db()
    assert receipt.evaluated_at is not None and fired("nonfinite-loss") == [30] and fired("loss-high") == []
    assert "IntegrityError" in RuleFault.objects.get(rule=rules["loss-high"]).error


def test_a_rule_row_with_a_broken_scope_or_persistence_is_isolated_too(sender, rules):
    Rule.objects.filter(pk=rules["loss-high"].pk).update(persistence={"points": "three"})
    Rule.objects.filter(pk=rules["loss-band"].pk).update(scope={"metrics": ["loss"], "component": 5})
    receipt = batch(sender, 0, nan_at=30, high_at=(40,))
    receipt.refresh_from_db()
    assert receipt.evaluated_at is not None and fired("nonfinite-loss") == [30]
    assert set(RuleFault.objects.values_list("rule__name", flat=True)) == {"loss-high", "loss-band"}


def test_an_event_rule_that_raises_spares_the_point_rules(sender, project, rules):
    event_rule = save_rule(
        Rule(project=project, name="dead-layer", kind="event", owner=OWNER, scope={"conditions": ["dead"]},
             persistence={"points": 1}, diagnostic_url="https://runbooks.example/dead", permitted_response="notify",
             params={"min_magnitude": 0.5}),
        source="test",
    )
    Rule.objects.filter(pk=event_rule.pk).update(params={"min_magnitude": "big"})
    response = sender.post({"run": {"id": "run-1"}, "points": [{"step": 1, "metric": "loss", "value": "NaN"}],
                            "events": [{"step": 1, "condition": "dead", "component": "blocks.0", "magnitude": 0.9}]})
    assert response.status_code == 202, response.content
    assert BatchReceipt.objects.get().evaluated_at is not None
    assert fired("nonfinite-loss") == [1] and fired("dead-layer") == []
    assert RuleFault.objects.get().rule == event_rule


def test_charts_of_a_broken_band_rule_answer_without_a_band(sender, teammate, rules):
    batch(sender, 0)
    Rule.objects.filter(pk=rules["loss-band"].pk).update(params={"width": "wide"})
    response = client_for(teammate).get("/api/v1/runs/run-1/series/", {"metric": "loss", "band": "1"})
    assert response.status_code == 200
    band = response.json()["band"]
    assert all(v is None or math.isfinite(v) for v in band["centre"])


def test_the_wall_clock_sweep_skips_a_broken_absence_rule_and_judges_the_others(sender, project, rules):
    good = make_rule(project, "silent-good", "absence", {"seconds": 60})
    bad = make_rule(project, "silent-bad", "absence", {"seconds": 60})
    Rule.objects.filter(pk=bad.pk).update(params={"seconds": "a minute"})
    batch(sender, 0)
    assert alert_silent_runs(now=timezone.now() + timedelta(hours=1)) == 1
    assert list(Alert.objects.filter(condition="silent").values_list("rule", flat=True)) == [good.pk]
