"""Evaluation has its own batches' blocks unpacked already: when a rule reads a metric across components (the
weight-jump rule reads each component's update_ratio over the batch and the sample before it), only the blocks
of other batches are read from the database. What it gets must be what a plain read of the database gives."""
import numpy as np
import pytest

from ingest.models import BatchReceipt, Block, Series
from ingest.storage import read_points_of_many, unpack

pytestmark = pytest.mark.django_db

COMPONENTS = ["layers.0", "layers.1"]


def batch(sender, steps, scale):
    points = [{"step": s, "metric": "update_ratio", "component": c, "value": scale * (1 + s % 7) * 1e-4}
              for s in steps for c in COMPONENTS]
    points += [{"step": s, "metric": "loss", "value": 2.0} for s in steps]
    response = sender.post({"run": {"id": "memo"}, "points": points})
    assert response.status_code in (200, 202), response.content


def test_a_read_besides_the_batches_at_hand_is_the_databases_read(sender, project):
    batch(sender, range(0, 50), 1.0)
    batch(sender, range(50, 100), 2.0)
    batch(sender, range(100, 150), 3.0)
    batch(sender, range(150, 200), 4.0)
    batch(sender, range(120, 130), 5.0)  # late and overlapping: the newest of these steps in a plain read too
    receipts = list(BatchReceipt.objects.order_by("pk").values_list("pk", flat=True))
    at_hand = receipts[2:]  # being judged: the last three, one of them out of order
    series = list(Series.objects.filter(metric="update_ratio").order_by("component"))
    known = {s.pk: [] for s in series}
    for block in Block.objects.filter(receipt_id__in=at_hand).order_by("pk"):
        steps, values, _ = unpack(block.data)
        known.setdefault(block.series_id, []).append((block.attempt, steps, values))

    for lo, hi in ((99, 199), (0, 199), (125, 160)):
        plain = read_points_of_many(series, lo, hi, stream=False)
        besides = read_points_of_many(series, lo, hi, stream=False, besides=(at_hand, known))
        for s in series:
            for got, expected in zip(besides[s.pk], plain[s.pk]):
                assert np.array_equal(got, expected), (lo, hi, s.component)
        assert plain[series[0].pk][0][0] == lo  # every span holds its first step
    # The first span starts at the step before the batches at hand: that step can only come from the database.
    assert read_points_of_many(series, 99, 199, stream=False, besides=(at_hand, known))[series[0].pk][0][0] == 99
