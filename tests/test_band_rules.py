"""Band rules: quiet through phase changes and benign restarts, loud on spikes and failed restores."""
import gzip
import json

import numpy as np
import pytest

from alerts.models import Alert, Rule
from alerts.rules import save_rule
from ingest.models import Run
from tests.real_runs_support import REAL_RUNS, import_real, labels

pytestmark = pytest.mark.django_db
OWNER = "Pretrain on-call <#pretrain-oncall>"


def loss_band_rule(project, **params):
    return save_rule(
        Rule(project=project, name="loss-band", kind="band", owner=OWNER, scope={"metrics": ["loss"]},
             persistence={"points": 3, "resolve_points": 10}, diagnostic_url="https://runbooks.example/loss",
             permitted_response="notify", params={"direction": "above", **params}),
        source="test",
    )


def loss_curve(n, seed=0):
    rng = np.random.default_rng(seed)
    return 3.0 * np.exp(-np.arange(n) / 400) + 2.0 + rng.normal(0, 0.02, n)


def send(sender, run_id, steps, values, phases=()):
    points = [{"step": int(s), "metric": "loss", "value": float(v)} for s, v in zip(steps, values)]
    response = sender.post({"run": {"id": run_id}, "phases": list(phases), "points": points})
    assert response.status_code == 202, response.content


def alerts_of(sender, run_id):
    return sender.get("/api/v1/alerts/", run=run_id).json()["results"]


def test_a_sustained_spike_fires_once_and_names_its_first_step_and_distance_outside_the_band(sender, project):
    loss_band_rule(project)
    loss = loss_curve(400)
    loss[300:306] *= 1.8
    for start in range(0, 400, 50):
        send(sender, "spiky", range(start, start + 50), loss[start:start + 50])
    [alert] = alerts_of(sender, "spiky")
    assert (alert["step"], alert["fired_step"], alert["metric"]) == (300, 302, "loss")
    assert alert["magnitude"] > 6 and alert["magnitude_unit"] == "σ beyond the band"
    assert alert["phase"] is None or alert["phase"] == "steady"


def test_a_one_step_blip_and_a_slow_decline_stay_quiet(sender, project):
    loss_band_rule(project)
    loss = loss_curve(400)
    loss[250] += 3.0
    send(sender, "blip", range(400), loss)
    assert alerts_of(sender, "blip") == []


def test_warmup_eval_and_the_settling_steps_after_a_phase_change_are_not_judged(sender, project):
    loss_band_rule(project)
    loss = loss_curve(400)
    loss[:40] += np.linspace(4, 0, 40)  # warmup: loss far from anything steady
    loss[200:210] += 1.0  # an eval phase: different batches, different loss
    loss[210:214] += 0.5  # settling after it
    phases = [{"step": 0, "phase": "warmup"}, {"step": 40, "phase": "steady"},
              {"step": 200, "phase": "eval"}, {"step": 210, "phase": "steady"}]
    send(sender, "phased", range(400), loss, phases)
    assert alerts_of(sender, "phased") == []


def test_the_same_jump_outside_the_eval_phase_fires(sender, project):
    loss_band_rule(project)
    loss = loss_curve(400)
    loss[200:210] += 1.0
    send(sender, "unphased", range(400), loss, [{"step": 0, "phase": "steady"}])
    assert [a["step"] for a in alerts_of(sender, "unphased")] == [200]


def test_a_restart_that_resumes_where_its_checkpoint_left_off_is_quiet(sender, project):
    loss_band_rule(project)
    loss = loss_curve(600)
    send(sender, "resume", range(0, 350), loss[:350])  # got to 349, checkpoint at 300
    send(sender, "resume", range(301, 600), loss[301:600] + 0.01, [{"step": 301, "phase": "restart"}, {"step": 302, "phase": "steady"}])
    assert alerts_of(sender, "resume") == []
    assert Run.objects.get(run_id="resume").attempt == 2


def test_a_restart_that_jumps_away_from_its_checkpoint_fires_within_a_few_steps(sender, project):
    """The pythia-410m case: the settling window after a restart must not hide a failed restore."""
    loss_band_rule(project)
    loss = loss_curve(600)
    send(sender, "bad-restore", range(0, 350), loss[:350])
    resumed = loss[301:600].copy()
    resumed[1:] += 8.0  # fine at the first resumed step, then the first update ruins it
    send(sender, "bad-restore", range(301, 600), resumed, [{"step": 301, "phase": "restart"}, {"step": 302, "phase": "steady"}])
    [alert] = alerts_of(sender, "bad-restore")
    assert alert["step"] == 302 and alert["fired_step"] <= 305


def test_re_evaluating_a_batch_creates_nothing_new(sender, project):
    from alerts.tasks import evaluate_batch
    from ingest.models import BatchReceipt

    loss_band_rule(project)
    loss = loss_curve(400)
    loss[300:306] *= 1.8
    send(sender, "again", range(400), loss)
    before = list(Alert.objects.values_list("id", "first_step", "last_step"))
    for receipt in BatchReceipt.objects.all():
        assert evaluate_batch(receipt.pk) is False
    assert list(Alert.objects.values_list("id", "first_step", "last_step")) == before


def first_arrival_line(name, step):
    with gzip.open(REAL_RUNS / f"{name}.ndjson.gz") as fh:
        for line in fh:
            if b'"point"' in line and json.loads(line)["step"] == step:
                return True
    return False


@pytest.mark.parametrize("name", ["pythia-410m-seed4", "pythia-410m-seed3"])
def test_the_real_failed_restores_are_alerted_within_20_steps_and_nothing_else_is(name, project, token, django_capture_on_commit_callbacks):
    from alerts.starter import install_starter_pack

    install_starter_pack(project)
    import_real(token, django_capture_on_commit_callbacks, name)
    [incident] = labels(name)["incidents"]
    alerts = list(Alert.objects.select_related("rule").order_by("fired_step"))
    assert alerts, "no alert on a labelled failed restore"
    assert all(a.rule.name == "loss-spike" for a in alerts)
    assert all(incident["start_step"] <= a.first_step for a in alerts)  # none at the benign restarts or in warmup
    assert alerts[0].fired_step - incident["start_step"] <= 20


@pytest.mark.parametrize("name", ["pythia-160m-seed4", "pythia-410m-seed8", "llmc-gpt2-124m-2024-10-13"])
def test_real_benign_runs_with_restarts_and_blips_raise_no_alert(name, project, token, django_capture_on_commit_callbacks):
    from alerts.starter import install_starter_pack

    install_starter_pack(project)
    import_real(token, django_capture_on_commit_callbacks, name)
    assert list(Alert.objects.values_list("rule__name", "first_step")) == []


def test_a_batch_that_arrives_late_is_judged_by_the_steps_before_it_not_after(sender, project):
    loss_band_rule(project)
    loss = loss_curve(600) + np.linspace(1.5, 0, 600)  # a steeper fall: steps 200-299 sit well above 300-399
    send(sender, "late", range(0, 200), loss[:200])
    send(sender, "late", range(300, 400), loss[300:400])
    send(sender, "late", range(200, 300), loss[200:300])  # the delayed batch
    send(sender, "late", range(400, 600), loss[400:600])
    assert alerts_of(sender, "late") == []
    assert Run.objects.get(run_id="late").attempt == 1  # late, not re-sent: no restart
