"""Validation divergence is alerted about an evaluation interval after it begins, and benign runs stay quiet.

Evaluations every 100 steps. An overfitting run's validation loss turns up
at a step drawn from the seed while its training loss keeps falling; benign
runs have a warmup, cosine decay, a restart that re-sends steps and a data
refresh after which the training loss jumps and the validation loss wobbles.
"""
import numpy as np
import pytest

from alerts.models import Alert, Rule
from alerts.starter import install_starter_pack

pytestmark = pytest.mark.django_db
EVERY = 100
STEPS = 2000


def curves(rng):
    steps = np.arange(1, STEPS + 1)
    lr = np.where(steps < 100, steps / 100, 0.5 * (1 + np.cos(np.pi * steps / STEPS)))
    progress = np.cumsum(lr) / np.sum(lr)
    training = 2.0 + 2.5 * np.exp(-6 * progress) + rng.normal(0, 0.03, STEPS)
    validation = 2.1 + 2.5 * np.exp(-6 * progress) + rng.normal(0, 0.004, STEPS)
    return steps, training, validation


def send(sender, run_id, steps, training, validation, phases=(), replay=None):
    """Batches of 50 steps; val_loss at every 100th step; `replay` = (checkpoint, crash): steps after the
    checkpoint sent again, with the same values, after the crash."""
    order = list(range(len(steps)))
    if replay:
        checkpoint, crash = replay
        order = list(range(crash)) + list(range(checkpoint, len(steps)))
    for lo in range(0, len(order), 50):
        points = []
        for i in order[lo:lo + 50]:
            points.append({"step": int(steps[i]), "metric": "loss", "value": float(training[i])})
            if steps[i] % EVERY == 0:
                points.append({"step": int(steps[i]), "metric": "val_loss", "value": float(validation[i])})
        body = {"run": {"id": run_id}, "points": points, "phases": list(phases) if lo == 0 else []}
        assert sender.post(body).status_code == 202
    return list(Alert.objects.filter(run__run_id=run_id, rule__name="validation-divergence").order_by("fired_step"))


@pytest.fixture
def divergence_only(project):
    install_starter_pack(project)
    Rule.objects.filter(project=project).exclude(name="validation-divergence").update(enabled=False)


def test_an_overfitting_run_is_alerted_within_one_and_a_half_evaluation_intervals(sender, divergence_only):
    delays = []
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        steps, training, validation = curves(rng)
        onset = int(rng.integers(800, 1500))
        after = steps >= onset
        # Memorising: the training loss falls faster, the validation loss rises (3-8% per 100 steps).
        training[after] -= np.linspace(0, 1.5, after.sum())
        validation[after] *= np.exp(rng.uniform(0.03, 0.08) * (steps[after] - onset) / EVERY)
        alerts = send(sender, f"overfit-{seed}", steps, training, validation)
        assert alerts, f"seed {seed}: divergence at {onset} not alerted"
        assert alerts[0].fired_step >= onset
        delays.append(alerts[0].fired_step - onset)
    assert np.median(delays) <= 1.5 * EVERY, delays
    # A rise is judged against the evaluation's own noise, from the lowest running median of three evaluations
    # (issue 20: noisy evaluation sets must not page): the slowest of these slow (3-8%) turns takes longer.
    assert max(delays) <= 2.5 * EVERY, delays


def test_benign_runs_with_warmup_cosine_decay_a_restart_and_a_data_refresh_are_quiet(sender, divergence_only):
    for seed in range(6):
        rng = np.random.default_rng(200 + seed)
        steps, training, validation = curves(rng)
        refresh = int(rng.integers(600, 1600))
        after = steps >= refresh
        # New data: the training loss jumps, then falls back; the validation loss moves by about 1%.
        training[after] += 0.4 * np.exp(-(steps[after] - refresh) / 60)
        validation[after] *= 1 + rng.uniform(-0.01, 0.01) * np.exp(-(steps[after] - refresh) / 300)
        checkpoint = int(rng.integers(500, 1500)) // EVERY * EVERY
        crash = checkpoint + int(rng.integers(120, 250))
        phases = [{"step": 1, "phase": "warmup"}, {"step": 100, "phase": "steady"},
                  {"step": refresh, "phase": "data_refresh"}, {"step": refresh + 10, "phase": "steady"}]
        assert send(sender, f"benign-{seed}", steps, training, validation, phases, replay=(checkpoint, crash)) == []
