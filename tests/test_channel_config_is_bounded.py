"""A channel's `config` is bounded (labels, label names, mapped runs, the run-id tag, its size as JSON), not only by
the 4 MiB body: beyond a bound the API answers 400 naming `config.<key>`, the console's form says so beside the
field, and nothing is stored."""
import json

import pytest

from notifications.channels import MAX_CONFIG_BYTES, MAX_LABELS, MAX_RUNS
from notifications.models import Channel, ChannelChange
from tests.factories import client_for

pytestmark = pytest.mark.django_db


def alertmanager(labels):
    return {"project": "pretrain", "name": "am", "kind": "alertmanager", "url": "https://am.example:9093",
            "config": {"labels": labels}}


def mlflow(**config):
    return {"project": "pretrain", "name": "ml", "kind": "mlflow", "url": "https://mlflow.example", "config": config}


def many_runs(count, width=30):
    return {f"run-{i:0{width}d}": f"{i:032x}" for i in range(count)}


@pytest.mark.parametrize("body, path", [
    (alertmanager({f"label_{i}": "x" for i in range(7000)}), "config.labels"),  # what was once taken
    (alertmanager({f"label_{i}": "x" for i in range(MAX_LABELS + 1)}), "config.labels"),
    (alertmanager({"l" * 101: "x"}), "config.labels"),
    (alertmanager({"team": "x" * 501}), "config.labels.team"),
    (mlflow(runs=many_runs(MAX_RUNS + 1, width=4)), "config.runs"),
    (mlflow(runs={"r" * 129: "abc"}), "config.runs"),
    (mlflow(run_id_tag="t" * 129), "config.run_id_tag"),
    # Under each count, over the size: 1,000 mapped runs whose MLflow ids are 200 characters long.
    (mlflow(runs={f"run-{i}": "f" * 200 for i in range(MAX_RUNS)}), "config.runs"),
    ({"project": "pretrain", "name": "hook", "kind": "webhook", "url": "https://hooks.example",
      "config": {"x" * 200_000: 1}}, "config." + "x" * 100),
])
def test_over_a_bound_is_a_400_naming_the_key(api, owner, body, path):
    api.force_login(owner)
    response = api.post("/api/v1/channels/", body, format="json")
    assert response.status_code == 400, response.content
    assert path in [e["path"] for e in response.json()["errors"]]
    assert len(response.content) < 5_000  # the answer does not echo what it refuses
    assert not Channel.objects.exists() and not ChannelChange.objects.exists()


def test_at_the_bounds_is_taken(api, owner):
    api.force_login(owner)
    labels = {f"label_{i}": "v" * 500 for i in range(MAX_LABELS - 1)} | {"l" * 100: "x"}
    assert api.post("/api/v1/channels/", alertmanager(labels), format="json").status_code == 201
    runs = many_runs(MAX_RUNS)  # ordinary run ids and MLflow's 32-hex ids: 1,000 of them fit
    assert len(json.dumps(runs)) < MAX_CONFIG_BYTES
    created = api.post("/api/v1/channels/", mlflow(runs=runs, run_id_tag="t" * 128), format="json")
    assert created.status_code == 201, created.content
    assert len(Channel.objects.get(name="ml").config["runs"]) == MAX_RUNS


def test_an_edit_over_a_bound_keeps_the_channel_as_it_was(api, owner):
    api.force_login(owner)
    channel_id = api.post("/api/v1/channels/", alertmanager({"team": "pretrain"}), format="json").json()["id"]
    too_many = {"config": {"labels": {f"label_{i}": "x" for i in range(MAX_LABELS + 1)}}}
    response = api.patch(f"/api/v1/channels/{channel_id}/", too_many, format="json")
    assert response.status_code == 400 and [e["path"] for e in response.json()["errors"]] == ["config.labels"]
    assert Channel.objects.get().config == {"labels": {"team": "pretrain"}}


def test_the_console_form_says_which_setting_is_over(owner):
    labels = {f"label_{i}": "x" for i in range(MAX_LABELS + 1)}
    response = client_for(owner).post("/channels/new/", {
        "project": "pretrain", "name": "am", "kind": "alertmanager", "url": "https://am.example:9093",
        "config": json.dumps({"labels": labels}), "enabled": "on"})
    assert response.status_code == 400
    assert f"config.labels: at most {MAX_LABELS} labels, got {MAX_LABELS + 1}" in response.content.decode()
    assert not Channel.objects.exists()
