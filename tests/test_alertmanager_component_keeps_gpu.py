"""An Alertmanager alert's component keeps both the node and the GPU (DCGM exporter labels: instance and gpu).

Before: `instance="node3:9400", gpu="5"` became component `node3:9400`, so two
GPUs of one node were one component and the GPU that failed was lost.
"""
import pytest

from tests.alertmanager_support import am_alert, notification

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "labels, component",
    [
        ({"instance": "node3:9400", "gpu": "5"}, "node3:9400/gpu5"),
        ({"instance": "node3:9400", "gpu": "nvidia5"}, "node3:9400/nvidia5"),
        ({"gpu": "5"}, "gpu5"),
        ({"instance": "node3:9400"}, "node3:9400"),
        ({"component": "layers.3", "instance": "node3:9400", "gpu": "5"}, "layers.3"),  # an explicit component wins
        ({}, "GpuXidError"),  # nothing to place it: the alert's name
        ({"instance": "node 3 (rack b)"}, "node_3__rack_b_"),  # characters a component cannot hold become _
    ],
)
def test_component_from_labels(webhook, labels, component):
    response = webhook.post(notification(am_alert(alertname="GpuXidError", run="llama-ft-7", **labels)))
    assert response.status_code == 202, response.content
    assert [e["component"] for e in webhook.events("llama-ft-7")] == [component]


def test_two_gpus_of_one_node_are_two_components(webhook):
    webhook.post(notification(
        am_alert(fingerprint="a", alertname="GpuXidError", run="llama-ft-7", instance="node3:9400", gpu="5"),
        am_alert(fingerprint="b", alertname="GpuXidError", run="llama-ft-7", instance="node3:9400", gpu="6"),
    ))
    assert sorted(e["component"] for e in webhook.events("llama-ft-7")) == ["node3:9400/gpu5", "node3:9400/gpu6"]
