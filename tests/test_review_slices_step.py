"""Step 4 of a review: evaluation metrics per slice beside the aggregate."""
import pytest

from reviews.steps.slices import slices
from tests.review_support import open_review, send, series

pytestmark = pytest.mark.django_db

EVALS = range(100, 1100, 100)  # ten evaluations


def linear(start, end):
    return [start + (end - start) * i / (len(EVALS) - 1) for i in range(len(EVALS))]


def rows_by_slice(step):
    return {r["slice"]: r for r in step["findings"]["rows"]}


def test_a_slice_that_worsens_while_the_aggregate_improves_asks_for_attention(sender):
    send(sender, "sl", series("loss", range(1000), [2.0] * 1000)
         + series("eval/acc", EVALS, linear(0.80, 0.90))
         + series("eval/rare/acc", EVALS, linear(0.88, 0.86))
         + series("eval/common/acc", EVALS, linear(0.81, 0.91)))
    step = slices(open_review("sl"))
    assert step["state"] == "attention"
    rare = rows_by_slice(step)["rare"]
    assert (rare["from_step"], rare["from"], rare["step"], rare["value"]) == (100, 0.88, 1000, 0.86)
    assert (rare["change"], rare["aggregate_from"], rare["aggregate"], rare["aggregate_change"]) == ("worsened", 0.8, 0.9, "improved")
    assert rare["flag"] == "worsened while the aggregate improved" and rare["highlight"]  # 1.4x the error: under 1.5x
    assert rows_by_slice(step)["common"]["flag"] is None
    assert step["findings"]["rows"][0]["slice"] == "rare"  # flagged rows first
    assert "rare acc worsened while the aggregate improved (0.88 at step 100 to 0.86 at step 1,000; aggregate 0.8 to 0.9)" in step["summary"]
    assert step["evidence"][0]["href"] == "/runs/sl/?metric=eval%2Frare%2Facc&start=100&end=1000"


def test_a_slice_far_worse_than_the_aggregate_is_flagged_by_the_factor(sender):
    # The example: 90% overall accuracy beside a subgroup with a 34.7% error rate.
    send(sender, "gap", series("val/acc", EVALS, [0.9] * 10) + series("val/subgroup/acc", EVALS, [0.653] * 10)
         + series("val/loss", EVALS, [1.0] * 10) + series("val/code/loss", EVALS, [1.4] * 10))
    step = slices(open_review("gap"))
    assert step["state"] == "attention"
    by = rows_by_slice(step)
    assert by["subgroup"]["worse_factor"] == pytest.approx(3.47, rel=1e-3)
    assert by["subgroup"]["flag"] == "3.47x worse than the aggregate"
    assert by["code"]["worse_factor"] == pytest.approx(1.4) and by["code"]["flag"] is None  # under 1.5x


def test_since_the_last_review_only_the_newer_evaluations_count(sender):
    send(sender, "sl2", series("loss", range(600), [2.0] * 600) + series("eval/all/loss", EVALS[:5], linear(3.0, 2.0)[:5])
         + series("eval/hard/loss", EVALS[:5], [2.0, 2.2, 2.4, 2.6, 2.8]))
    first = open_review("sl2")  # the slice worsened before this review: that one saw it
    send(sender, "sl2", series("loss", range(600, 1100), [2.0] * 500) + series("eval/all/loss", EVALS[5:], linear(3.0, 2.0)[5:])
         + series("eval/hard/loss", EVALS[5:], [2.8, 2.75, 2.7, 2.65, 2.6]))
    step = slices(open_review("sl2", previous=first))
    hard = rows_by_slice(step)["hard"]
    assert (hard["from_step"], hard["from"], hard["change"]) == (500, 2.8, "improved")
    assert hard["aggregate_change"] == "improved"  # eval/all/loss stands for the aggregate
    assert step["state"] == "pass"
    assert slices(open_review("sl2"))["state"] == "attention"  # over the whole run it did worsen


def test_a_run_without_sliced_metrics_has_no_data(sender):
    send(sender, "plain", series("loss", range(100), [2.0] * 100) + series("eval/acc", EVALS, [0.5] * 10))
    step = slices(open_review("plain"))
    assert step["state"] == "no_data" and "No sliced evaluation metrics" in step["summary"]
