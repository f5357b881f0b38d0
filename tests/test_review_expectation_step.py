"""Step 3 of a review: components outside their band, and the run beside its reference runs at the same steps."""
import pytest

from ingest.models import Run
from reviews.steps.expectation import expectation
from tests.factories import make_alert, make_rule
from tests.review_support import open_review, section_rows, send, series

pytestmark = pytest.mark.django_db


def curve(steps, scale=1.0):
    return [scale * (2.0 + 8.0 / (1 + s / 100)) for s in steps]


def reference(sender, run_id, scale=1.0, n=1000):
    send(sender, run_id, series("loss", range(n), curve(range(n), scale)))
    Run.objects.filter(run_id=run_id).update(reference=True)


def test_components_outside_their_band_are_listed_by_the_step_they_left_it(sender, project):
    send(sender, "banded", series("loss", range(400), curve(range(400))))
    run = Run.objects.get(run_id="banded")
    rule = make_rule(project, "gradient-explosion", kind="band", scope={"metrics": ["grad_norm"], "component": "*"})
    late = make_alert(rule, run=run, component="layers.9.mlp", metric="grad_norm", first_step=300, magnitude=7.5)
    early = make_alert(rule, run=run, component="layers.2.attn", metric="grad_norm", first_step=120, magnitude=9.25)
    step = expectation(open_review("banded"))
    assert step["state"] == "attention"
    rows = [(r["component"], r["first_step"], r["magnitude"], r["unit"], r["alert"]) for r in step["findings"]["rows"]]
    assert rows == [("layers.2.attn", 120, 9.25, "σ beyond the band", early.pk), ("layers.9.mlp", 300, 7.5, "σ beyond the band", late.pk)]
    assert "first grad_norm on layers.2.attn from step 120 (9.25 σ beyond the band)" in step["summary"]
    assert step["evidence"][0]["href"].endswith(f"#alert-{early.pk}")


def test_a_resolved_band_alert_from_before_the_last_review_is_not_listed(sender, project):
    send(sender, "old", series("loss", range(200), curve(range(200))))
    run = Run.objects.get(run_id="old")
    make_alert(make_rule(project), run=run, component="", metric="loss", first_step=20, state="resolved")
    first = open_review("old")
    send(sender, "old", series("loss", range(200, 300), curve(range(200, 300))))
    assert expectation(open_review("old", previous=first))["findings"]["rows"] == []


def test_a_run_worse_than_its_reference_at_the_same_steps_asks_for_attention(sender):
    reference(sender, "ref")
    send(sender, "slow", series("loss", range(800), curve(range(800), scale=1.3)))
    step = expectation(open_review("slow"))
    assert step["state"] == "attention"
    rows = section_rows(step, "reference")
    assert [r["step"] for r in rows] == [200, 400, 599, 799]  # quarters of the newest common step (799)
    last = rows[-1]
    assert last["ratio"] == pytest.approx(1.3, rel=1e-3)
    assert last["reference"] == pytest.approx(sum(curve(range(750, 800))) / 50, rel=1e-4)
    assert "loss at step 799" in step["summary"] and "ratio 1.3" in step["summary"]


def test_a_run_within_its_references_passes_with_the_reference_band(sender):
    reference(sender, "ref-a", scale=0.98)
    reference(sender, "ref-b", scale=1.02)
    send(sender, "ok", series("loss", range(600), curve(range(600))))
    step = expectation(open_review("ok"))
    assert step["state"] == "pass", step["summary"]
    last = section_rows(step, "reference")[-1]
    assert last["reference_min"] < last["run"] < last["reference_max"]
    assert last["ratio"] == pytest.approx(1.0, abs=1e-3) and last["references"] == 2
    assert set(step["findings"]["references"]) == {"ref-a", "ref-b"}


def test_without_a_reference_run_the_comparison_has_no_data(sender):
    send(sender, "alone", series("loss", range(300), curve(range(300))))
    step = expectation(open_review("alone"))
    assert step["state"] == "no_data"
    assert step["summary"].startswith("No reference run to compare with")
    assert step["findings"]["sections"][0]["empty"] == "No reference run to compare with."


def test_a_review_opened_by_an_alert_compares_the_alerts_metric_too(sender, project):
    reference(sender, "ref")
    send(sender, "alerted", series("loss", range(400), curve(range(400)))
         + series("grad_norm", range(400), [2.0] * 400, component="layers.1"))
    send(sender, "ref", series("grad_norm", range(400), [1.0] * 400, component="layers.1"))
    run = Run.objects.get(run_id="alerted")
    alert = make_alert(make_rule(project, "gradient-explosion", scope={"metrics": ["grad_norm"], "component": "*"}),
                       run=run, component="layers.1", metric="grad_norm", first_step=200)
    step = expectation(open_review("alerted", alert=alert))
    metrics = {r["metric"] for r in section_rows(step, "reference")}
    assert metrics == {"loss", "grad_norm on layers.1"}
    grad = [r for r in section_rows(step, "reference") if r["metric"] == "grad_norm on layers.1"][-1]
    assert grad["ratio"] == pytest.approx(2.0)
