"""Chart data: bounded buckets that never hide a spike or a non-finite value; finer data on zoom; access."""
import numpy as np
import pytest

from alerts.starter import install_starter_pack

pytestmark = pytest.mark.django_db
STEPS = 20_000


@pytest.fixture
def spiky_run(sender, project):
    install_starter_pack(project)
    rng = np.random.default_rng(0)
    loss = 2.0 + rng.normal(0, 0.01, STEPS)
    loss[12_345] = 50.0  # one step, once
    for lo in range(0, STEPS, 5000):
        points = [{"step": s, "metric": "loss", "value": float(loss[s])} for s in range(lo, lo + 5000)]
        if lo == 15_000:
            points[1234]["value"] = "NaN"  # step 16,234
        assert sender.post({"run": {"id": "spiky"}, "points": points}).status_code == 202
    return loss


def chart(client, **params):
    response = client.get("/api/v1/runs/spiky/series/", {"metric": "loss", **params})
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("buckets", [2000, 300, 40])
def test_a_one_step_spike_and_a_nan_show_at_every_zoom_level(api, owner, spiky_run, buckets):
    api.force_authenticate(owner)
    for start, end in [(None, None), (10_000, 19_999), (12_000, 12_600)]:
        params = {"buckets": buckets, **({} if start is None else {"start": start, "end": end})}
        data = chart(api, **params)
        assert len(data["step"]) <= buckets
        assert max(v for v in data["max"] if v is not None) == 50.0
        if start is None or end >= 16_234 >= start:
            flagged = [s for s, n in zip(data["step"], data["nonfinite"]) if n]
            assert len(flagged) == 1 and flagged[0] >= 16_234
            assert flagged[0] - data["bucket_steps"] < 16_234


def test_zooming_in_fetches_finer_data_down_to_the_raw_points(api, owner, spiky_run):
    api.force_authenticate(owner)
    wide = chart(api, buckets=100)
    narrow = chart(api, buckets=100, start=12_300, end=12_399)
    assert wide["resolution"] == "rollup" and wide["bucket_steps"] >= 128
    assert narrow["resolution"] == "raw" and narrow["bucket_steps"] == 1
    assert narrow["step"] == list(range(12_300, 12_400))
    assert narrow["last"][45] == 50.0 and narrow["last"][0] == pytest.approx(spiky_run[12_300])


def test_the_band_comes_with_the_data_and_names_the_rule_it_belongs_to(api, owner, spiky_run):
    api.force_authenticate(owner)
    data = chart(api, band=1, start=12_000, end=12_600, buckets=600)
    band = data["band"]
    assert band["rule"] == "loss-spike"
    at = band["step"].index(12_345)
    assert band["upper"][at] < 50.0 and band["lower"][at] < 2.0 < band["upper"][at]


def test_members_read_outsiders_and_strangers_do_not(api, owner, teammate, outsider, spiky_run):
    api.force_authenticate(teammate)
    assert api.get("/api/v1/runs/spiky/series/", {"metric": "loss"}).status_code == 200
    api.force_authenticate(outsider)
    assert api.get("/api/v1/runs/spiky/series/", {"metric": "loss"}).status_code == 404
    api.force_authenticate(None)
    assert api.get("/api/v1/runs/spiky/series/", {"metric": "loss"}).status_code in (401, 403)


def test_bad_parameters_name_the_field(api, owner, spiky_run):
    api.force_authenticate(owner)

    def error_paths(**params):
        response = api.get("/api/v1/runs/spiky/series/", params)
        assert response.status_code == 400
        return [e["path"] for e in response.json()["errors"]]

    assert error_paths() == ["metric"]
    assert error_paths(metric="loss", buckets=0) == ["buckets"]
    assert error_paths(metric="loss", start="x") == ["start"]
    assert api.get("/api/v1/runs/spiky/series/", {"metric": "nope"}).status_code == 404
