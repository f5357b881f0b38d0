"""What the backtest tests share: made-up loss curves sent in batches, a draft rule, the runs they replay."""
import numpy as np
import pytest

from ingest.models import Run
from tests.factories import OWNER, client_for

URL = "/api/v1/rules/backtest/"


def loss_curve(n, seed=0):
    rng = np.random.default_rng(seed)
    return 3.0 * np.exp(-np.arange(n) / 400) + 2.0 + rng.normal(0, 0.02, n)


def wire(value):
    """Non-finite values are data: the wire spells them as strings."""
    value = float(value)
    if np.isfinite(value):
        return value
    return "NaN" if np.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def send_in_batches(sender, run_id, series, size=50, tags=None):
    """series: {(metric, component): values}; sent as consecutive batches of `size` steps."""
    n = len(next(iter(series.values())))
    for start in range(0, n, size):
        points = [
            {"step": s, "metric": metric, "value": wire(values[s]), **({"component": component} if component else {})}
            for s in range(start, min(n, start + size)) for (metric, component), values in series.items()
        ]
        body = {"run": {"id": run_id, "tags": tags or {"team": "pretrain"}}, "points": points}
        response = sender.post(body)
        assert response.status_code == 202, response.content


def draft(**changes):
    rule = {"project": "pretrain", "name": "loss-band", "kind": "band", "description": "", "owner": OWNER,
            "scope": {"metrics": ["loss"]}, "persistence": {"points": 3, "resolve_points": 10},
            "diagnostic_url": "https://runbooks.example/loss", "permitted_response": "notify",
            "params": {"direction": "above", "width": 6.0}}
    return {**rule, **changes}


def form(**changes):
    """The rule form's fields for the same draft, as the Backtest button posts them."""
    fields = {"name": "loss-band", "project": "pretrain", "kind": "band", "description": "", "enabled": "on",
              "owner": OWNER, "scope": '{"metrics": ["loss"]}', "persistence": '{"points": 3, "resolve_points": 10}',
              "diagnostic_url": "https://runbooks.example/loss", "permitted_response": "notify",
              "params": '{"direction": "above", "width": 6.0}', "backtest_runs": ""}
    return {**fields, **changes}


def post(user, body):
    """Start a backtest (202 with the job, or the error)."""
    return client_for(user).post(URL, body, content_type="application/json")


def job_of(user, response):
    """The started job as `user` reads it back from the 202's Location."""
    assert response.status_code == 202, response.content
    read = client_for(user).get(response["Location"])
    assert read.status_code == 200, read.content
    return read.json()


def backtested(user, body):
    """Start a backtest and read its result: the tests run tasks eagerly, so it is done when the 202 comes."""
    job = job_of(user, post(user, body))
    assert job["state"] == "done", job
    return job["result"]


@pytest.fixture
def runs(sender):
    """Three runs of the project: two spiky (team pretrain, then team vision), one calm."""
    for run_id, seed, spike, team in (("spiky-a", 0, 300, "pretrain"), ("spiky-b", 1, 200, "vision"), ("calm", 2, None, "pretrain")):
        loss = loss_curve(400, seed)
        if spike:
            loss[spike:spike + 6] *= 1.8
        send_in_batches(sender, run_id, {("loss", ""): loss}, size=100, tags={"team": team})
    return Run.objects.order_by("run_id")
