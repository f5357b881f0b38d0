"""weight_jump keeps the latest `window` per-step log ratios of a component's weight norm as its history (what a
component without update_ratio is judged against). A batch in which every change stays within its update ratios
joins that history in one step, without the point-by-point loop: the history must be the same numbers, in the
same order, as one ratio a step."""
import math

import numpy as np
import pytest

from alerts.models import RuleProgress
from alerts.starter import install_starter_pack
from tests.test_weight_jump import COMPONENTS, healthy_run, send

pytestmark = pytest.mark.django_db


def test_the_history_after_quiet_batches_is_every_steps_log_ratio(sender, project):
    install_starter_pack(project)
    steps = np.arange(300)
    per_component, loss = healthy_run(np.random.default_rng(3), steps)
    # Health metrics every 2 steps: each ratio is a change over a gap of 2, kept per step.
    alerts = send(sender, "quiet", steps, per_component, loss, every=2)
    assert not [a for a in alerts if a.rule.kind == "weight_jump"]
    for c, component in enumerate(COMPONENTS):
        progress = RuleProgress.objects.get(run__run_id="quiet", rule__kind="weight_jump", component=component)
        weights = per_component["weight_norm"][::2, c]
        expected = [abs(math.log(weights[i]) - math.log(weights[i - 1])) / 2 for i in range(1, len(weights))]
        window = len(progress.state["rates"])
        assert window == min(len(expected), 100)
        assert np.allclose(progress.state["rates"], expected[-window:], rtol=1e-12, atol=0)
        assert progress.state["last"][:2] == [298, float(weights[-1])]
