"""Telemetry of a ten-component model as a job sends it, for the incident and sticky-invariant tests."""
import numpy as np

from alerts.models import Incident
from alerts.starter import install_starter_pack

COMPONENTS = [f"layers.{i}" for i in range(10)]


def healthy(steps, seed=0, components=COMPONENTS, health=True):
    """Points of a healthy run: a falling loss, and each component's weight and gradient norms near a level."""
    rng = np.random.default_rng(seed)
    points = []
    for step in steps:
        points.append({"step": step, "metric": "loss", "value": float(2.0 * np.exp(-step / 500) + rng.normal(0, 0.01))})
        if health:
            for i, component in enumerate(components):
                points.append({"step": step, "metric": "weight_norm", "component": component, "value": float(10 + i + rng.normal(0, 0.01))})
                points.append({"step": step, "metric": "grad_norm", "component": component, "value": float(1 + 0.1 * i + rng.normal(0, 0.02))})
    return points


def nan_in_one_weight(step, bad="layers.4", components=COMPONENTS, loss=True, health=True):
    """What one NaN written into one weight of `bad` shows at `step`: its weight norm, every component's
    activation and gradient norm (the forward pass carries the NaN everywhere, the backward pass back) and the
    loss, all non-finite. The weights are non-finite from the first point (nonfinite-weights), the gradients
    only at a rate (nonfinite-gradients: 3 of 20), so one step of this is one alert per component and the loss."""
    points = [{"step": step, "metric": "loss", "value": "NaN"}] if loss else []
    if health:
        for i, component in enumerate(components):  # the others' weights as healthy() has them
            points.append({"step": step, "metric": "weight_norm", "component": component,
                           "value": "NaN" if component == bad else 10.0 + i})
            points.append({"step": step, "metric": "act_norm", "component": component, "value": "NaN"})
            points.append({"step": step, "metric": "grad_norm", "component": component, "value": "NaN"})
    return points


def send(sender, run_id, points):
    response = sender.post({"run": {"id": run_id}, "points": points})
    assert response.status_code == 202, response.content
    return response


def starter_project(project):
    install_starter_pack(project)
    return project


def incidents(run_id):
    return list(Incident.objects.filter(run__run_id=run_id).select_related("origin__rule").order_by("opened_at", "id"))


def two_alert_incident(project):
    """One incident of two nonfinite alerts in run llama-ft-7 (layers.4's weights, then layers.1's gradients):
    (the incident, its alerts)."""
    from alerts.incidents import group_new_alerts
    from ingest.models import Run
    from tests.factories import make_alert, make_rule

    health = make_rule(project, "nonfinite-gradients", kind="nonfinite", scope={"metrics": ["weight_norm", "grad_norm"]})
    alerts = [make_alert(health, "llama-ft-7", "layers.4", metric="weight_norm", first_step=30),
              make_alert(health, "llama-ft-7", "layers.1", metric="grad_norm", first_step=31)]
    [made] = group_new_alerts(Run.objects.get(run_id="llama-ft-7"))
    return made, alerts
