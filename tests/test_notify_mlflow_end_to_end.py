"""A job's incident reaches its MLflow run: ingest fires a rule, the incident is routed to the project's MLflow
channel and written onto the run the job named, read back from a real `mlflow server` — opened, then resolved."""
from alerts.models import Incident
from notifications.models import Delivery
from tests.notify_support import calm, fire, make_channel, spike_rule

PREFIX = "warninglight.incident"


def test_an_incident_from_ingest_lands_on_the_jobs_mlflow_run(project, sender, mlflow_server):
    mlflow_run = mlflow_server.create_run("llama-ft-7")
    spike_rule(project)
    channel = make_channel(project, kind="mlflow", url=mlflow_server.url)
    sender.post({"run": {"id": "run-n", "tags": {"mlflow_run_id": mlflow_run}}, "points": []})

    fire(sender, step=100, high=("layers.1",))
    incident = Incident.objects.get()
    tags = mlflow_server.tags(mlflow_run)
    mine = f"{PREFIX}.{incident.pk}"
    assert (tags[f"{mine}.component"], tags[f"{mine}.step"], tags[f"{mine}.metric"], tags[f"{mine}.state"]) == (
        "layers.1", "100", "grad_norm", "open")
    [point] = mlflow_server.history(mlflow_run, "warninglight.incident_magnitude")
    assert point["step"] == 100

    calm(sender, after=100, points=3)
    assert mlflow_server.tags(mlflow_run)[f"{mine}.state"] == "resolved"
    assert list(Delivery.objects.filter(channel=channel).values_list("status", flat=True)) == ["ok", "ok"]


def test_a_channel_can_name_the_run_tag_that_holds_the_mlflow_run(project, sender, mlflow_server):
    mlflow_run = mlflow_server.create_run("tracked elsewhere")
    spike_rule(project)
    make_channel(project, kind="mlflow", url=mlflow_server.url, config={"run_id_tag": "tracking_run"})
    sender.post({"run": {"id": "run-n", "tags": {"tracking_run": mlflow_run}}, "points": []})

    fire(sender, step=100, high=("layers.2",))
    assert mlflow_server.tags(mlflow_run)[f"{PREFIX}.{Incident.objects.get().pk}.component"] == "layers.2"
