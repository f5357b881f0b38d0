"""Building runs for the review-step tests: batches through the ingest endpoint, and a review row opened on them."""
from django.utils import timezone

from ingest.models import Run
from reviews.models import Review

T0 = 1_764_400_000.0  # the points' own times start here (Unix seconds)


def send(sender, run, points=(), phases=(), events=()):
    """Posts one batch; `run` is a run id or a run object of the contract."""
    body = {"run": run if isinstance(run, dict) else {"id": run}, "phases": list(phases), "points": list(points),
            "events": list(events)}
    response = sender.post(body)
    assert response.status_code == 202, response.content
    return response


def series(metric, steps, values, component=None, seconds_per_step=None):
    """Points of one series; with seconds_per_step each carries its own time."""
    out = []
    for step, value in zip(steps, values):
        point = {"step": int(step), "metric": metric, "value": value if isinstance(value, str) else float(value)}
        if component:
            point["component"] = component
        if seconds_per_step is not None:
            point["time"] = T0 + step * seconds_per_step
        out.append(point)
    return out


def open_review(run_id, previous=None, **fields):
    run = Run.objects.get(run_id=run_id)
    return Review.objects.create(run=run, trigger="manual", opened_at=timezone.now(), opened_step=run.max_step,
                                 previous=previous, **fields)


def step_of(steps, number):
    [step] = [s for s in steps if s["number"] == number]
    return step


def section_rows(step, key):
    [found] = [s for s in step["findings"]["sections"] if s["key"] == key]
    return found["rows"]
