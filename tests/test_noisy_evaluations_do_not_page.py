"""Validation divergence is judged against the evaluation's own noise: a small, noisy evaluation set that
moves a few percent from one evaluation to the next and rises mildly late in training pages nobody; a real
divergence still does, within about an evaluation interval."""
import numpy as np
import pytest

from alerts.starter import install_starter_pack
from tests.engine_support import alerts

pytestmark = pytest.mark.django_db


def send(sender, run_id, val, every, seed=0, steps=2000, overfit_from=None):
    rng = np.random.default_rng(seed)
    points = []
    for step in range(steps):
        train = 2.0 * np.exp(-step / 600) + 1.0 + rng.normal(0, 0.01)
        if overfit_from is not None and step >= overfit_from:
            train *= np.exp(-(step - overfit_from) / 200)
        points.append({"step": step, "metric": "loss", "value": float(train)})
        if step and step % every == 0:
            points.append({"step": step, "metric": "val_loss", "value": float(val(step, rng))})
    for first in range(0, len(points), 2000):
        assert sender.post({"run": {"id": run_id}, "points": points[first:first + 2000]}).status_code == 202


def noisy_val(step, rng):
    # Falls, flattens, then rises 0.5% per 100 steps late in training; each evaluation ±4% (a tiny held-out set).
    return (2.0 * np.exp(-step / 500) + 1.1 + 0.00005 * max(0, step - 1000)) * (1 + rng.normal(0, 0.04))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("every", [50, 100])
def test_a_noisy_evaluation_with_a_mild_late_rise_pages_nobody(sender, project, seed, every):
    install_starter_pack(project)
    send(sender, f"noisy-{every}-{seed}", noisy_val, every, seed=seed)
    assert alerts(f"noisy-{every}-{seed}", "validation-divergence") == []


def test_a_real_divergence_on_the_same_noisy_evaluation_still_pages(sender, project):
    install_starter_pack(project)

    def diverging(step, rng):
        rise = 1.0 + 0.5 * max(0, step - 1200) / 100  # +50% of the level per 100 steps after 1200
        return (2.0 * np.exp(-step / 500) + 1.1) * rise * (1 + rng.normal(0, 0.04))

    send(sender, "diverging", diverging, 100, overfit_from=1200)
    [alert] = alerts("diverging", "validation-divergence")
    assert 1200 < alert.fired_step <= 1400


def test_a_divergence_that_stops_rising_but_stays_up_stays_open(sender, project):
    install_starter_pack(project)

    def plateau(step, rng):
        rise = 1.0 + 0.5 * min(max(0, step - 1200), 300) / 100  # +150% by 1500, then flat: it never comes back
        return (2.0 * np.exp(-step / 500) + 1.1) * rise * (1 + rng.normal(0, 0.01))

    send(sender, "plateau", plateau, 100, overfit_from=1200)
    [alert] = alerts("plateau", "validation-divergence")
    assert 1200 < alert.fired_step <= 1400 and alert.state == "firing" and alert.last_step == 1900


def send_early(sender, run_id, vals, train_noise, seed=0, steps=800):
    """Evaluations every 100 steps with the given values (from step 100); a falling training loss with that noise."""
    rng = np.random.default_rng(seed)
    points = []
    for step in range(steps):
        points.append({"step": step, "metric": "loss", "value": float(2.0 * np.exp(-step / 400) + 1.2 + rng.normal(0, train_noise))})
        if step and step % 100 == 0 and step // 100 <= len(vals):
            points.append({"step": step, "metric": "val_loss", "value": vals[step // 100 - 1]})
    assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202


@pytest.mark.parametrize("seed", range(3))
def test_a_noisy_first_few_evaluations_page_nobody(sender, project, seed):
    # The first evaluation is the lowest by chance and the next two stand 11% and 13% above it: too few
    # evaluations to know their own noise, but a training loss that moves ±0.15 from one step to the next says
    # an evaluation set this small can move that much.
    install_starter_pack(project)
    send_early(sender, f"early-{seed}", [2.52, 2.80, 2.84, 2.80, 2.42, 2.81, 2.33], train_noise=0.15, seed=seed)
    assert alerts(f"early-{seed}", "validation-divergence") == []


def test_a_divergence_at_the_third_evaluation_of_a_quiet_run_still_pages_at_once(sender, project):
    install_starter_pack(project)
    send_early(sender, "early-diverging", [2.50, 2.30, 2.90, 3.40, 3.90, 4.40, 4.90], train_noise=0.01)
    [alert] = alerts("early-diverging", "validation-divergence")
    assert alert.fired_step == 300 and alert.state == "firing"
