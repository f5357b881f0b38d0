"""An eval and a checkpoint at the same step (the Trainer's default when eval_steps == save_steps) are both kept:
listed on the run, drawn on the run page, seen by a rule scoped to either, and a checkpoint's pause stays
out of the throughput rules and baselines whatever else ran at that step."""
import json

import pytest
from django.test import Client

from tests.factories import make_rule

pytestmark = pytest.mark.django_db


def trainer_phases(step, regular="steady"):
    # What the Hugging Face callback sends after a step that both evaluated and saved (on_evaluate, then on_save).
    return [{"step": step, "phase": "eval", "time": 1.0}, {"step": step + 1, "phase": regular, "time": 1.0},
            {"step": step, "phase": "checkpoint", "time": 2.0}, {"step": step + 1, "phase": regular, "time": 2.0}]


def post(sender, run_id, points, phases=()):
    response = sender.post({"run": {"id": run_id}, "phases": list(phases), "points": points})
    assert response.status_code == 202, response.content


def alerts_of(sender, run_id):
    return sender.get("/api/v1/alerts/", run=run_id).json()["results"]


def test_both_phases_at_one_step_are_listed_and_drawn(sender, owner):
    post(sender, "both", [{"step": s, "metric": "loss", "value": 1.0} for s in range(0, 60)],
         [{"step": 0, "phase": "steady"}, *trainer_phases(50)])
    spans = sender.get("/api/v1/runs/both/").json()["phase_spans"]
    assert [(s["start"], s["end"], s["phase"]) for s in spans] == [
        (0, 49, "steady"), (50, 50, "eval"), (50, 50, "checkpoint"), (51, None, "steady")]
    client = Client()
    client.force_login(owner)
    html = client.get("/runs/both/").content.decode()
    chart = json.loads(html.split('id="run-chart-data" type="application/json">')[1].split("</script>")[0])
    assert [(p["start"], p["kind"]) for p in chart["phases"]] == [(50, "eval"), (50, "checkpoint")]


def test_a_rule_scoped_to_eval_sees_the_step_a_checkpoint_was_also_saved_at(sender, project):
    make_rule(project, "eval-loss-high", "threshold", scope={"metrics": ["eval_loss"], "phases": ["eval"]},
              persistence={"points": 1, "resolve_points": 1}, params={"above": 3.0})
    points = [{"step": s, "metric": "eval_loss", "value": 5.0} for s in (50, 100)]
    post(sender, "evalck", points, [{"step": 0, "phase": "steady"}, *trainer_phases(50), *trainer_phases(100)])
    alerts = alerts_of(sender, "evalck")
    assert [(a["step"], a["phase"]) for a in alerts] == [(50, "eval")]  # one alert, held at 50 and 100, named by its eval
    assert alerts[0]["last_step"] == 100


def test_a_checkpoint_pause_at_an_eval_step_is_no_throughput_alarm(sender, project):
    # By default a rule skips eval and checkpoint steps; judged only where the rule names eval, and then
    # against the steps that were both (not against evals alone, which ran at full speed).
    make_rule(project, "throughput-low", "threshold", scope={"metrics": ["throughput"]},
              persistence={"points": 1, "resolve_points": 1}, params={"below": 500.0})
    make_rule(project, "throughput-drop-incl-eval", "band", scope={"metrics": ["throughput"], "phases": ["steady", "eval"]},
              persistence={"points": 1, "resolve_points": 1},
              params={"direction": "below", "width": 6.0, "settle_steps": 0, "window": 20, "min_history": 5})
    phases = [{"step": 0, "phase": "steady"}]
    points = []
    for step in range(0, 400):
        paused = step % 50 == 0 and step > 0  # an eval and a checkpoint: the save stalls the step
        if step % 10 == 0 and step > 0:
            phases += trainer_phases(step) if paused else [{"step": step, "phase": "eval"}, {"step": step + 1, "phase": "steady"}]
        points.append({"step": step, "metric": "throughput", "value": 100.0 if paused else 1000.0 + (step % 7)})
    post(sender, "pauses", points, phases)
    assert alerts_of(sender, "pauses") == []
    # The band rule does judge those steps: an eval alone at a tenth of the speed is an alarm.
    post(sender, "pauses", [{"step": 400, "metric": "throughput", "value": 100.0}], [{"step": 400, "phase": "eval"}])
    assert [(a["rule"]["name"], a["step"]) for a in alerts_of(sender, "pauses")] == [("throughput-drop-incl-eval", 400)]
