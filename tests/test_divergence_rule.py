"""Divergence: validation loss rising over 3 evaluations in a row while the training loss keeps falling."""
import pytest

from alerts.models import Rule
from alerts.rules import save_rule

pytestmark = pytest.mark.django_db
OWNER = "Pretrain on-call <#pretrain-oncall>"


@pytest.fixture
def rule(project):
    return save_rule(
        Rule(project=project, name="val-divergence", kind="divergence", owner=OWNER,
             scope={"metrics": ["val_loss"], "component": ""},
             params={"training": "loss", "evaluations": 3, "min_rise": 0.01},
             persistence={"points": 1}, diagnostic_url="https://runbooks.example/val-divergence", permitted_response="review"),
        source="test",
    )


def falling(step):
    return 3.0 - 0.01 * step


def falling_then_rising(step):
    return falling(step) if step <= 50 else falling(50) + 0.01 * (step - 50)


def send_run(sender, run_id, training, validation, last_step=100):
    """A job's batches, one per 10 steps: the training loss of each step and val_loss at every 10th step."""
    for start in range(0, last_step + 1, 10):
        steps = range(start, min(start + 10, last_step + 1))
        points = [{"step": s, "metric": "loss", "value": training(s)} for s in steps]
        points += [{"step": s, "metric": "val_loss", "value": validation[s]} for s in steps if s in validation]
        sender.post({"run": {"id": run_id}, "points": points})
    return sender.get("/api/v1/alerts/", run=run_id).json()["results"]


# val_loss falls until step 50, then rises by 2% at 60, 70 and 80 (and keeps rising).
OVERFITTING = {s: 2.0 - 0.01 * s for s in range(0, 60, 10)} | {60: 1.53, 70: 1.5606, 80: 1.5918, 90: 1.6236, 100: 1.6561}


def test_validation_rising_three_evaluations_while_training_falls_fires_once_at_the_third(sender, rule):
    [alert] = send_run(sender, "overfit", falling, OVERFITTING)
    assert (alert["rule"]["name"], alert["metric"], alert["component"]) == ("val-divergence", "val_loss", None)
    # 50 was the lowest; 60 and 70 are the first two rises; 80 is the third.
    assert (alert["step"], alert["fired_step"]) == (80, 80)
    assert alert["last_step"] == 100  # still rising: the same alert, extended
    assert alert["magnitude"] == pytest.approx((1.5918 - 1.5) / 1.5, rel=1e-6)  # from the lowest, at 50, to 80
    assert alert["magnitude_unit"] == "relative rise of the validation metric"
    assert alert["state"] == "firing"


def test_two_rises_are_not_yet_divergence(sender, rule):
    two_rises = {s: v for s, v in OVERFITTING.items() if s <= 70}
    assert send_run(sender, "early", falling, two_rises, last_step=79) == []


def test_both_losses_rising_is_not_divergence(sender, rule):
    # The training loss turns up at step 50 too: the run is getting worse, not overfitting.
    assert send_run(sender, "both-up", falling_then_rising, OVERFITTING) == []


def test_validation_noise_rising_twice_in_a_row_at_most_does_not_fire(sender, rule):
    # Falling overall, with at most two rises in a row: down, up, up, down, up, up, down, …
    noisy, value = {}, 2.0
    for i, s in enumerate(range(0, 201, 10)):
        value += -0.06 if i % 3 == 0 else 0.025
        noisy[s] = value
    assert send_run(sender, "noisy", falling, noisy, last_step=200) == []
