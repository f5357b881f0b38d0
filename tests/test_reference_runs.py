"""Reference runs: their telemetry joins the band, so a new run is judged from its first steps."""
import numpy as np
import pytest
from django.core.management import CommandError, call_command

from alerts.models import Rule
from alerts.rules import save_rule
from ingest.models import Run

pytestmark = pytest.mark.django_db


def send(sender, run_id, values, start=0):
    points = [{"step": start + i, "metric": "loss", "value": float(v)} for i, v in enumerate(values)]
    assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202


def loss(n, seed):
    return 2.0 + np.random.default_rng(seed).normal(0, 0.02, n)


@pytest.fixture
def band_rule(project):
    return save_rule(
        Rule(project=project, name="loss-band", kind="band", owner="Pretrain on-call <#pretrain-oncall>",
             scope={"metrics": ["loss"]}, persistence={"points": 3}, diagnostic_url="https://runbooks.example/loss",
             permitted_response="notify", params={"direction": "above", "reference_window": 50}),
        source="test",
    )


def test_a_run_with_no_history_of_its_own_is_judged_against_the_reference_runs(sender, band_rule):
    send(sender, "ref-1", loss(200, 1))
    send(sender, "ref-2", loss(200, 2))
    call_command("mark_reference", "ref-1", "ref-2")
    assert set(Run.objects.filter(reference=True).values_list("run_id", flat=True)) == {"ref-1", "ref-2"}
    send(sender, "new", np.r_[loss(5, 3), np.full(5, 3.0)])  # steps 5-9: far above what the references did
    [alert] = sender.get("/api/v1/alerts/", run="new").json()["results"]
    assert (alert["step"], alert["fired_step"]) == (5, 7)


def test_without_reference_runs_the_same_start_is_not_judged(sender, band_rule):
    send(sender, "ref-1", loss(200, 1))
    send(sender, "new", np.r_[loss(5, 3), np.full(5, 3.0)])
    assert sender.get("/api/v1/alerts/", run="new").json()["results"] == []


def test_unmarking_and_unknown_runs(sender, band_rule):
    send(sender, "ref-1", loss(30, 1))
    call_command("mark_reference", "ref-1")
    call_command("mark_reference", "ref-1", "--off")
    assert not Run.objects.get(run_id="ref-1").reference
    with pytest.raises(CommandError, match="no such run: nope"):
        call_command("mark_reference", "nope")
