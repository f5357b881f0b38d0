"""What judging a batch writes back of a rule's memory per series: each row exactly as it was held in memory
(on PostgreSQL in one statement, whatever the values), a phase kind the batch did not touch as it was stored,
and a row the batch did not change not at all."""
import pytest
from django.db import connection

from alerts.evaluation import _Evaluator, update_rows
from alerts.models import BandSample, Rule, RuleProgress
from alerts.rules import save_rule
from ingest.models import Series
from tests.test_band_rules import OWNER, alerts_of, loss_band_rule, loss_curve, send
from tests.test_band_state_is_compact import old_form

pytestmark = pytest.mark.django_db
STEADY_THEN_DECAY = [{"step": 0, "phase": "steady"}, {"step": 300, "phase": "lr_decay"}]


def loss_progress(run_id):
    return RuleProgress.objects.get(run__run_id=run_id, metric="loss")


@pytest.mark.postgres
def test_rows_written_together_read_back_exactly_whatever_their_values(sender, project):
    loss_band_rule(project)
    for run_id in ("a", "b", "c"):
        send(sender, run_id, range(50), loss_curve(50))
    a, b, c = (loss_progress(run_id) for run_id in ("a", "b", "c"))
    wanted = {
        # JSON carries these exactly: the one-statement form.
        a.pk: {"held_points": 7, "held_since_step": 2**40, "held_since_time": 1712345678.123456789,
               "clear_points": 0, "state": {"history": {"steady": {"s": "eJw=", "f4": ""}}, "note": "ü ' \" \\ %s"}},
        b.pk: {"held_points": 0, "held_since_step": None, "held_since_time": None, "clear_points": 3,
               "state": {"recent": [True, False], "peak": 1e-300}},
        # A non-finite float and a float where PostgreSQL wants an integer: not JSON's to carry, written as before.
        c.pk: {"held_points": 1, "held_since_step": 12.0, "held_since_time": float("inf"), "clear_points": 2,
               "state": {}},
    }
    update_rows(RuleProgress, list(wanted.items()))
    for pk, fields in wanted.items():
        stored = RuleProgress.objects.values(*fields).get(pk=pk)
        assert stored == fields
    # The same rows again, now all JSON-safe: one statement for them all, the same text for two rows or three
    # (a statement the driver has seen is not parsed again: every batch writes a different number of rows).
    wanted[c.pk] = {**wanted[c.pk], "held_since_step": 12, "held_since_time": 5.5}
    with CaptureUpdates() as three:
        update_rows(RuleProgress, list(wanted.items()))
    with CaptureUpdates() as two:
        update_rows(RuleProgress, list(wanted.items())[1:])
    assert three.count == two.count == 1
    assert three.statements == two.statements
    assert [RuleProgress.objects.values(*f).get(pk=pk) for pk, f in wanted.items()] == list(wanted.values())


def test_a_phase_kind_the_batch_did_not_touch_is_stored_as_it_was(sender, project):
    loss_band_rule(project)
    loss = loss_curve(600)
    for run_id in ("kept", "upgraded"):
        send(sender, run_id, range(400), loss[:400], STEADY_THEN_DECAY)
    progress = loss_progress("upgraded")
    assert set(progress.state["history"]) == {"steady", "lr_decay"}
    # Rows written before the compact form: the steady history in the old form.
    progress.state = {**progress.state, "history": {**progress.state["history"],
                                                    "steady": old_form(progress.state["history"]["steady"])}}
    progress.save()
    steady_before = loss_progress("upgraded").state["history"]["steady"]
    decay_before = loss_progress("upgraded").state["history"]["lr_decay"]
    for run_id in ("kept", "upgraded"):
        send(sender, run_id, range(400, 600), loss[400:600], STEADY_THEN_DECAY)
    after = loss_progress("upgraded").state["history"]
    assert after["steady"] == steady_before  # not unpacked and packed again: still the old form
    assert after["lr_decay"] != decay_before
    # And the history the batch did touch is what a row stored compactly all along holds.
    assert after["lr_decay"] == loss_progress("kept").state["history"]["lr_decay"]


def test_a_batch_that_changes_nothing_of_a_row_does_not_rewrite_it(sender, project):
    save_rule(Rule(project=project, name="loss-ceiling", kind="threshold", owner=OWNER, scope={"metrics": ["loss"]},
                   persistence={"points": 3}, diagnostic_url="https://runbooks.example/loss",
                   permitted_response="notify", params={"above": 100.0}), source="test")
    send(sender, "evals", range(300), loss_curve(300), [{"step": 0, "phase": "steady"}])
    before = loss_progress("evals")
    # A batch wholly inside an eval phase, which the rule does not judge: its row stays as it was, unwritten.
    with CaptureUpdates() as updates:
        send(sender, "evals", range(300, 320), loss_curve(320)[300:] + 1000.0,
             [{"step": 0, "phase": "steady"}, {"step": 300, "phase": "eval"}])
    after = loss_progress("evals")
    fields = ("held_points", "held_since_step", "clear_points", "state")
    assert [getattr(after, f) for f in fields] == [getattr(before, f) for f in fields]
    assert updates.count == 0
    assert alerts_of(sender, "evals") == []


class CaptureUpdates:
    """Counts the statements that update alerts_ruleprogress."""

    def __enter__(self):
        self.count, self.statements = 0, []
        self._wrapper = connection.execute_wrapper(self._seen)
        self._wrapper.__enter__()
        return self

    def __exit__(self, *exc):
        return self._wrapper.__exit__(*exc)

    def _seen(self, execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("UPDATE") and "alerts_ruleprogress" in sql:
            self.count += 1
            self.statements.append(sql)
        return execute(sql, params, many, context)


@pytest.mark.postgres
def test_band_samples_written_together_replace_their_bucket_and_keep_an_infinite_edge(sender, project):
    rule = loss_band_rule(project)
    send(sender, "sampled", range(50), loss_curve(50))
    series = Series.objects.get(run__run_id="sampled", metric="loss")

    def save(*samples):
        """Samples as the evaluator keeps them: rows of (rule, series, bucket, step, centre, lower, upper)."""
        evaluator = _Evaluator.__new__(_Evaluator)
        evaluator.band_samples = {(rule.pk, series.pk, bucket): (rule.pk, series.pk, bucket, *rest)
                                  for bucket, *rest in samples}
        evaluator.save_band_samples()

    save((900, 115200, 2.5, 2.25, 2.75), (901, 115300, 2.5, None, 3.0))
    save((901, 115327, 2.4, 2.0, float("inf")))  # JSON cannot carry the infinite edge: written the other way
    rows = BandSample.objects.filter(series=series, bucket__gte=900).order_by("bucket")
    assert list(rows.values_list("bucket", "step", "centre", "lower", "upper")) == [
        (900, 115200, 2.5, 2.25, 2.75), (901, 115327, 2.4, 2.0, float("inf"))]
