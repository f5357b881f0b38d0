"""A band rule's history is stored compactly (every batch writes it back), and a row stored in the old form
before an upgrade goes on judging exactly as it would have."""
import base64

import numpy as np
import pytest

from alerts.models import RuleProgress
from tests.test_band_rules import alerts_of, loss_band_rule, loss_curve, send

pytestmark = pytest.mark.django_db


def old_form(packed):
    """The form rows had before: raw int64 steps and float64 values, base64 in the JSON."""
    from alerts.evaluation import _unpack_history

    steps, values = _unpack_history(packed)
    return [base64.b64encode(steps.astype("<i8").tobytes()).decode(), base64.b64encode(values.astype("<f8").tobytes()).decode()]


def spiky_loss():
    loss = loss_curve(600)
    loss[450:458] *= 1.8
    return loss


def test_the_stored_history_is_a_fraction_of_the_raw_arrays(sender, project):
    loss_band_rule(project)
    send(sender, "compact", range(400), np.float32(loss_curve(400)).astype(float))
    progress = RuleProgress.objects.get(run__run_id="compact", metric="loss")
    [(kind, packed)] = progress.state["history"].items()
    raw = len("".join(old_form(packed)))
    assert kind == "steady"
    assert len(str(packed)) < raw / 3  # consecutive steps pack to a few bytes, float32 values to four each


def test_a_row_in_the_old_form_judges_the_next_batches_as_the_compact_one_does(sender, project):
    loss_band_rule(project)
    loss = spiky_loss()
    for run_id in ("kept", "upgraded"):
        send(sender, run_id, range(300), loss[:300])
    progress = RuleProgress.objects.get(run__run_id="upgraded", metric="loss")
    progress.state = {**progress.state, "history": {k: old_form(v) for k, v in progress.state["history"].items()}}
    progress.save()
    for run_id in ("kept", "upgraded"):
        for start in range(300, 600, 50):
            send(sender, run_id, range(start, start + 50), loss[start:start + 50])
    kept, upgraded = alerts_of(sender, "kept"), alerts_of(sender, "upgraded")
    assert [a["step"] for a in kept] == [450]
    fields = ("step", "fired_step", "last_step", "magnitude", "state")
    assert [{f: a[f] for f in fields} for a in upgraded] == [{f: a[f] for f in fields} for a in kept]
