"""Rules judge each stored batch once: persistence, one open alert per (rule, run, component), a row per change."""
import pytest

from alerts.models import Alert, AlertChange, Rule
from alerts.rules import save_rule
from alerts.tasks import evaluate_batch, sweep_unevaluated
from ingest.models import BatchReceipt, Run

pytestmark = pytest.mark.django_db
OWNER = "Pretrain on-call <#pretrain-oncall>"


def make_rule(project, name, kind, scope, persistence, params=None, response="notify"):
    return save_rule(
        Rule(project=project, name=name, kind=kind, owner=OWNER, scope=scope, persistence=persistence,
             diagnostic_url=f"https://runbooks.example/{name}", permitted_response=response, params=params or {}),
        source="test",
    )


def grad_points(steps, bad_component=None, bad_steps=()):
    return [
        {"step": s, "metric": "grad_norm", "component": c, "value": "NaN" if (c == bad_component and s in bad_steps) else 1.0}
        for s in steps for c in ("layers.0", "layers.1", "layers.2", "layers.3")
    ]


def alerts_of(sender, run_id):
    return sender.get("/api/v1/alerts/", run=run_id).json()["results"]


def test_nonfinite_gradients_in_one_layer_fire_one_alert_naming_it_then_extend_then_resolve(sender, project):
    make_rule(project, "grad-nonfinite", "nonfinite", {"metrics": ["grad_norm"]}, {"points": 2, "resolve_points": 3})
    sender.post({"run": {"id": "nf"}, "points": grad_points(range(0, 12), "layers.3", {10, 11})})
    [alert] = alerts_of(sender, "nf")
    # It held from step 10 and fired at 11, when two points in a row had held.
    assert (alert["component"], alert["metric"], alert["step"], alert["fired_step"], alert["last_step"]) == ("layers.3", "grad_norm", 10, 11, 11)
    assert (alert["state"], alert["verdict"], alert["magnitude"], alert["magnitude_unit"]) == ("firing", None, 2.0, "non-finite points in a row")
    assert alert["rule"] == {"id": alert["rule"]["id"], "name": "grad-nonfinite", "owner": OWNER, "permitted_response": "notify",
                             "diagnostic_url": "https://runbooks.example/grad-nonfinite"}
    assert Run.objects.get().status == "alerting"

    sender.post({"run": {"id": "nf"}, "points": grad_points(range(12, 14), "layers.3", {12, 13})})
    [alert] = alerts_of(sender, "nf")
    assert (alert["last_step"], alert["magnitude"]) == (13, 4.0)

    sender.post({"run": {"id": "nf"}, "points": grad_points(range(14, 17))})
    [alert] = alerts_of(sender, "nf")
    assert alert["state"] == "resolved"
    assert list(AlertChange.objects.values_list("kind", "step")) == [("fired", 11), ("extended", 12), ("resolved", 16)]
    assert Run.objects.get().status == "healthy"


def test_a_single_nan_does_not_outlast_a_two_point_persistence(sender, project):
    make_rule(project, "grad-nonfinite", "nonfinite", {"metrics": ["grad_norm"]}, {"points": 2})
    sender.post({"run": {"id": "blip"}, "points": grad_points(range(0, 5), "layers.1", {2})})
    assert alerts_of(sender, "blip") == []


def test_threshold_rule_is_quiet_in_warmup_and_fires_in_steady(sender, project):
    make_rule(project, "loss-high", "threshold", {"metrics": ["loss"]}, {"points": 3}, params={"above": 5.0})
    phases = [{"step": 0, "phase": "warmup"}, {"step": 100, "phase": "steady"}]
    points = [{"step": s, "metric": "loss", "value": 9.0 if s < 100 or s >= 150 else 2.0} for s in range(200)]
    sender.post({"run": {"id": "thr"}, "phases": phases, "points": points})
    [alert] = alerts_of(sender, "thr")
    assert (alert["step"], alert["phase"], alert["magnitude"], alert["magnitude_unit"]) == (150, "steady", 4.0, "above 5.0")


def test_event_rule_fires_on_a_job_reported_condition_at_or_above_its_magnitude(sender, project):
    make_rule(project, "dead-layer", "event", {"conditions": ["dead"]}, {"points": 1}, params={"min_magnitude": 0.9})
    events = [
        {"step": 5, "component": "layers.7.mlp", "condition": "dead", "magnitude": 0.5},
        {"step": 6, "component": "layers.7.mlp", "condition": "dead", "magnitude": 0.97},
        {"step": 6, "component": "layers.2.attn", "condition": "oscillating", "magnitude": 3.0},
    ]
    sender.post({"run": {"id": "ev"}, "events": events})
    [alert] = alerts_of(sender, "ev")
    assert (alert["component"], alert["condition"], alert["step"], alert["magnitude"]) == ("layers.7.mlp", "dead", 6, 0.97)


def test_re_evaluating_a_batch_creates_nothing(sender, project):
    make_rule(project, "grad-nonfinite", "nonfinite", {"metrics": ["grad_norm"]}, {"points": 1})
    sender.post({"run": {"id": "again"}, "points": grad_points(range(0, 2), "layers.0", {1})})
    before = (Alert.objects.count(), AlertChange.objects.count())
    assert evaluate_batch(BatchReceipt.objects.get().pk) is False
    assert (Alert.objects.count(), AlertChange.objects.count()) == before == (1, 1)


def test_an_alert_survives_a_worker_crash_exactly_once(sender, project, monkeypatch, settings):
    make_rule(project, "grad-nonfinite", "nonfinite", {"metrics": ["grad_norm"]}, {"points": 1})

    def crash(*args, **kwargs):
        raise SystemExit("worker killed mid-evaluation")

    monkeypatch.setattr(AlertChange.objects, "bulk_create", crash)  # after the alert's row is written
    with pytest.raises(SystemExit):
        sender.post({"run": {"id": "crash"}, "points": grad_points(range(0, 2), "layers.2", {1})})
    assert Alert.objects.count() == 0  # the half-done evaluation was rolled back with its transaction
    assert BatchReceipt.objects.get().evaluated_at is None  # and the batch is still owed an evaluation
    monkeypatch.undo()
    assert sweep_unevaluated(grace_seconds=0) == 0  # its message is redelivered (acks_late): nobody queues it again
    settings.EVALUATION_REQUEUE_SECONDS = 0  # ... unless it never comes: then the sweep takes the batch
    assert sweep_unevaluated(grace_seconds=0) == 1
    assert sweep_unevaluated(grace_seconds=0) == 0
    assert Alert.objects.count() == 1 and AlertChange.objects.count() == 1


def test_alerts_of_a_run_are_hidden_from_outsiders(api, sender, project, outsider, owner):
    make_rule(project, "grad-nonfinite", "nonfinite", {"metrics": ["grad_norm"]}, {"points": 1})
    sender.post({"run": {"id": "private"}, "points": grad_points(range(0, 2), "layers.0", {0})})
    api.force_login(outsider)
    assert api.get("/api/v1/alerts/", {"run": "private"}).status_code == 404
    api.force_login(owner)
    assert len(api.get("/api/v1/alerts/", {"run": "private"}).json()["results"]) == 1


def test_one_alert_per_component_does_not_depend_on_how_the_job_batched(sender, project):
    """Two metrics of one component go bad at different steps: the alert starts at the earlier, however batched."""
    make_rule(project, "health-nonfinite", "nonfinite", {"metrics": ["weight_norm", "grad_norm"], "component": "*"},
              {"points": 1, "resolve_points": 3})

    def points(steps):
        out = []
        for s in steps:
            out.append({"step": s, "metric": "grad_norm", "component": "tok", "value": "NaN" if s >= 150 else 1.0})
            out.append({"step": s, "metric": "weight_norm", "component": "tok", "value": "NaN" if s >= 160 else 1.0})
        return out

    sender.post({"run": {"id": "one-batch"}, "points": points(range(140, 170))})
    sender.post({"run": {"id": "two-batches"}, "points": points(range(140, 155))})
    sender.post({"run": {"id": "two-batches"}, "points": points(range(155, 170))})
    one = [(a["step"], a["fired_step"], a["state"]) for a in sender.get("/api/v1/alerts/", run="one-batch").json()["results"]]
    two = [(a["step"], a["fired_step"], a["state"]) for a in sender.get("/api/v1/alerts/", run="two-batches").json()["results"]]
    assert one == two == [(150, 150, "firing")]  # held from 150 (grad_norm), fired there in both
