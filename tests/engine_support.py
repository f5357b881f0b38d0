"""Synthetic runs for the starter pack's fault classes: a job's telemetry as it would send it, batch by batch.

`Job` makes the points of a healthy run of a few components (loss, lr, step_time, throughput, and each
component's grad_norm, weight_norm and update_ratio, with noise) step by step; a test bends one series
with `override` and sends it in batches, as a job does.
"""
import numpy as np

from alerts.models import Alert, Incident
from alerts.starter import install_starter_pack

COMPONENTS = ["embed", "block.0", "block.1", "head"]


class Job:
    def __init__(self, seed=0, components=COMPONENTS, lr=1e-3, step_seconds=0.2):
        self.rng = np.random.default_rng(seed)
        self.components = components
        self.lr = lr
        self.step_seconds = step_seconds
        self.time = 1_764_000_000.0
        self.overrides = []  # (metric, component or None, fn(step, value) -> value or None to drop the point)
        self.lr_every = 1  # the learning rate is sent at every n-th step (trainers log it less often than health)

    def override(self, metric, fn, component=""):
        self.overrides.append((metric, component, fn))

    def value(self, metric, component, step, value):
        for m, c, fn in self.overrides:
            if m == metric and c == component:
                value = fn(step, value)
        return value

    def lr_at(self, step):
        return self.value("lr", "", step, self.lr)

    def points(self, steps):
        out = []
        for step in steps:
            seconds = self.value("step_time", "", step, self.step_seconds * (1 + abs(self.rng.normal(0, 0.05))))
            self.time += seconds
            lr = self.lr_at(step)
            run = {
                "loss": 2.0 * np.exp(-step / 3000) + 1.0 + self.rng.normal(0, 0.01),
                "lr": lr,
                "step_time": seconds,
                "throughput": 64 / seconds,
                "grad_norm": 1.2 * (1 + self.rng.normal(0, 0.05)),
            }
            if step % self.lr_every:
                del run["lr"]
            for metric, value in run.items():
                value = value if metric in ("step_time", "throughput", "lr") else self.value(metric, "", step, value)
                if value is not None:
                    out.append({"step": step, "metric": metric, "value": _wire(value), "time": self.time})
            for i, component in enumerate(self.components):
                health = {
                    "grad_norm": (0.5 + 0.1 * i) * (1 + self.rng.normal(0, 0.05)),
                    "weight_norm": 10.0 + i + 0.0001 * step,
                    "update_ratio": lr * 0.5 * (1 + self.rng.normal(0, 0.05)),
                }
                for metric, value in health.items():
                    value = self.value(metric, component, step, value)
                    if value is not None:
                        out.append({"step": step, "metric": metric, "component": component, "value": _wire(value),
                                    "time": self.time})
        return out

    def send(self, sender, run_id, start, end, batch=100, phases=(), run=None):
        for first in range(start, end, batch):
            steps = range(first, min(end, first + batch))
            body = {"run": {"id": run_id, **(run or {})}, "points": self.points(steps),
                    "phases": [p for p in phases if first <= p["step"] < first + batch]}
            response = sender.post(body)
            assert response.status_code == 202, response.content


def _wire(value):
    value = float(value)
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def starter(project):
    install_starter_pack(project)
    return project


def alerts(run_id, rule=None):
    qs = Alert.objects.filter(run__run_id=run_id).select_related("rule").order_by("first_step", "id")
    return [a for a in qs if rule is None or a.rule.name == rule]


def rule_names(run_id):
    return sorted({a.rule.name for a in alerts(run_id)})


def incidents(run_id):
    return list(Incident.objects.filter(run__run_id=run_id).select_related("origin__rule").order_by("opened_at", "id"))
