"""A component whose own weights jump (outside the optimizer) is named first, before what it does downstream."""
import numpy as np
import pytest

from alerts.models import Alert
from alerts.starter import install_starter_pack

pytestmark = pytest.mark.django_db
COMPONENTS = ["embed", "blocks.0.attn", "blocks.0.mlp", "blocks.1.attn", "blocks.1.mlp", "head"]


def healthy_run(rng, steps):
    """Per component: weight norms moved only by updates (‖Δw‖ = update_ratio × ‖w‖), warmup included."""
    n, k = len(steps), len(COMPONENTS)
    ratio = np.exp(rng.normal(np.log(1e-3), 0.3, (n, k)))
    ratio[:30] *= np.linspace(30, 1, 30)[:, None]  # large first updates: the optimizer may move weights a lot
    # The norm changes by at most the update's size, in a random direction relative to the weights.
    change = 1 + ratio * rng.uniform(-1, 1, (n, k))
    weight = rng.uniform(5, 100, k) * np.vstack([np.ones(k), np.cumprod(change[:-1], axis=0)])
    grad = rng.uniform(0.05, 1, k) * np.exp(rng.normal(0, 0.15, (n, k)))
    act = rng.uniform(1, 10, k) * np.exp(rng.normal(0, 0.05, (n, k)))
    loss = 2.0 + np.exp(-steps / 200) + rng.normal(0, 0.02, n)
    return {"weight_norm": weight, "update_ratio": ratio, "grad_norm": grad, "act_norm": act}, loss


def send(sender, run_id, steps, per_component, loss, every=1, metrics=("weight_norm", "update_ratio", "grad_norm", "act_norm")):
    """Points as a job sends them: the loss every step, health metrics every `every` steps."""
    def wire(v):
        return v if np.isfinite(v) else ("Infinity" if v > 0 else "NaN")

    for lo in range(0, len(steps), 100):
        points = []
        for i in range(lo, min(lo + 100, len(steps))):
            points.append({"step": int(steps[i]), "metric": "loss", "value": float(loss[i])})
            if steps[i] % every:
                continue
            for metric in metrics:
                for c, component in enumerate(COMPONENTS):
                    points.append({"step": int(steps[i]), "metric": metric, "component": component,
                                   "value": wire(float(per_component[metric][i, c]))})
        assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202
    return list(Alert.objects.filter(run__run_id=run_id).select_related("rule").order_by("fired_step", "id"))


def multiply_weights(rng, per_component, loss, steps, every=1):
    """A component's weights × 20 before step `at`'s forward pass, and what follows from it."""
    at = int(rng.integers(200, 400)) // every * every
    c = int(rng.integers(1, len(COMPONENTS)))
    i = int(np.searchsorted(steps, at))
    per_component["weight_norm"][i:, c] *= 20
    per_component["act_norm"][i:, c:] *= 20
    per_component["grad_norm"][i:, :c] *= 50  # the gradients flowing back through it explode...
    per_component["grad_norm"][i, c - 1] = np.inf  # ...one of them overflowing at that very step
    loss[i:] += 3.0
    return at, COMPONENTS[c]


@pytest.mark.parametrize("seed", [41, 42])
def test_a_twentyfold_weight_jump_names_its_component_first_with_update_ratio(sender, project, seed):
    install_starter_pack(project)
    rng = np.random.default_rng(seed)
    steps = np.arange(600)
    per_component, loss = healthy_run(rng, steps)
    at, component = multiply_weights(rng, per_component, loss, steps)
    alerts = send(sender, "jump", steps, per_component, loss)
    first = alerts[0]
    assert (first.rule.name, first.component, first.metric) == ("weight-jump", component, "weight_norm")
    assert first.first_step == first.fired_step == at
    assert first.magnitude == pytest.approx(20, rel=0.05)
    # What follows downstream fires right after it (the exploding gradients upstream); one overflow at that step
    # is what a loss scaler skips, judged by rate (nonfinite-gradients), not an alert of its own.
    assert any(at < a.fired_step <= at + 3 and a.component != component for a in alerts[1:])
    assert [a.component for a in alerts if a.rule.name == "weight-jump"] == [component]


def test_without_update_ratio_and_sampled_every_ten_steps_the_jump_is_still_named_first(sender, project):
    install_starter_pack(project)
    rng = np.random.default_rng(43)
    steps = np.arange(800)
    per_component, loss = healthy_run(rng, steps)
    at, component = multiply_weights(rng, per_component, loss, steps, every=10)
    alerts = send(sender, "sparse", steps, per_component, loss, every=10, metrics=("weight_norm", "grad_norm", "act_norm"))
    first = alerts[0]
    assert (first.rule.name, first.component, first.fired_step) == ("weight-jump", component, at)


def test_weights_moved_only_by_the_optimizer_raise_no_weight_jump(sender, project):
    install_starter_pack(project)
    for seed in (44, 45, 46):
        rng = np.random.default_rng(seed)
        steps = np.arange(600)
        per_component, loss = healthy_run(rng, steps)
        assert [a for a in send(sender, f"healthy-{seed}", steps, per_component, loss) if a.rule.name == "weight-jump"] == []
        sparse = [a for a in send(sender, f"healthy-sparse-{seed}", steps, per_component, loss, every=10,
                                  metrics=("weight_norm",)) if a.rule.name == "weight-jump"]
        assert sparse == []
