"""An incident written onto the job's MLflow run, read back from a real `mlflow server`: tags, then the resolution."""
import math

from notifications.message import ChannelTarget
from notifications.senders import mlflow
from tests.mlflow_support import incident_message

PREFIX = "warninglight.incident.17"


def target(server, **fields):
    return ChannelTarget(kind="mlflow", url=server.url, **fields)


def test_an_opened_then_resolved_incident_is_on_the_mlflow_run(mlflow_server):
    run = mlflow_server.create_run()
    opened = incident_message(run_tags={"mlflow_run_id": run, "team": "pretrain"})

    outcome = mlflow.send(target(mlflow_server), opened)
    assert outcome.ok and outcome.status_code == 200 and run in outcome.detail
    tags = mlflow_server.tags(run)
    assert tags == {
        f"{PREFIX}.component": "layers.4", f"{PREFIX}.metric": "grad_norm", f"{PREFIX}.step": "1200",
        f"{PREFIX}.magnitude": "3.0", f"{PREFIX}.unit": "non-finite points in a row", f"{PREFIX}.rule": "grad-nonfinite",
        f"{PREFIX}.severity": "notify", f"{PREFIX}.state": "open", f"{PREFIX}.url": "http://console.example/inbox/?incident=17",
    }
    [point] = mlflow_server.history(run, "warninglight.incident_magnitude")
    assert (point["step"], point["value"], point["timestamp"]) == (1200, 3.0, opened.opened_at.timestamp() * 1000)

    assert mlflow.send(target(mlflow_server), incident_message(event="resolved", run_tags={"mlflow_run_id": run})).ok
    assert mlflow_server.tags(run) == {**tags, f"{PREFIX}.state": "resolved"}
    assert len(mlflow_server.history(run, "warninglight.incident_magnitude")) == 1


def test_the_channels_mapping_names_the_mlflow_run_before_the_jobs_tag(mlflow_server):
    mapped, tagged = mlflow_server.create_run("mapped"), mlflow_server.create_run("tagged")
    channel = target(mlflow_server, config={"runs": {"pythia-410m-seed4": mapped}})
    assert mlflow.send(channel, incident_message(run_tags={"mlflow_run_id": tagged})).ok
    assert mlflow_server.tags(mapped)[f"{PREFIX}.state"] == "open" and mlflow_server.tags(tagged) == {}


def test_a_non_finite_magnitude_is_a_nan_metric_and_a_word(mlflow_server):
    run = mlflow_server.create_run()
    assert mlflow.send(target(mlflow_server), incident_message(magnitude=math.nan, run_tags={"mlflow_run_id": run})).ok
    assert mlflow_server.tags(run)[f"{PREFIX}.magnitude"] == "NaN"
    assert [p["value"] for p in mlflow_server.history(run, "warninglight.incident_magnitude")] == ["NaN"]


def test_a_repeated_delivery_changes_nothing(mlflow_server):
    run = mlflow_server.create_run()
    message = incident_message(run_tags={"mlflow_run_id": run})
    assert mlflow.send(target(mlflow_server), message).ok and mlflow.send(target(mlflow_server), message).ok
    assert len(mlflow_server.history(run, "warninglight.incident_magnitude")) == 1


def test_an_mlflow_run_that_does_not_exist_is_not_retried(mlflow_server):
    outcome = mlflow.send(target(mlflow_server), incident_message(run_tags={"mlflow_run_id": "0" * 32}))
    assert not outcome.ok and not outcome.retry and outcome.status_code == 404
    assert outcome.detail == "HTTP 404"  # the server's own words are never shown back (issue 21)
