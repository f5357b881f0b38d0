"""After a rewind the chart's band follows the run's current attempt in step order and breaks at the restart:
a null separates the band before the restart from the band after it, and no band is drawn over the abandoned
attempt's points past where the current attempt has reached (they were judged against another history)."""
import numpy as np
import pytest

from alerts.starter import install_starter_pack

pytestmark = pytest.mark.django_db


def loss(steps, level):
    rng = np.random.default_rng(int(level * 100))
    return [{"step": int(s), "metric": "loss", "value": float(3 * np.exp(-s / 300) + level + rng.normal(0, 0.02))} for s in steps]


@pytest.fixture(params=[True, False], ids=["band rule", "default band"])
def rewound(request, sender, project):
    """Attempt 1 ran to step 2999; attempt 2 resumed from step 1200 at another level and has reached 2199."""
    if request.param:
        install_starter_pack(project)  # judged as it arrives: wide charts draw the stored band
    for lo in range(0, 3000, 1000):
        assert sender.post({"run": {"id": "rewound"}, "points": loss(range(lo, lo + 1000), 2.0)}).status_code == 202
    for lo in range(1200, 2200, 500):
        assert sender.post({"run": {"id": "rewound"}, "points": loss(range(lo, lo + 500), 2.3)}).status_code == 202
    sender.pack = request.param
    return sender


def band(sender, **params):
    body = sender.get("/api/v1/runs/rewound/series/", metric="loss", band=1, **params).json()
    return body["resolution"], body["band"]


def segments(band):
    """The band's stretches between breaks (entries whose lower and upper are null)."""
    out, current = [], []
    for step, lower, upper in zip(band["step"], band["lower"], band["upper"]):
        if lower is None and upper is None:
            if current:
                out.append(current)
            current = []
        else:
            current.append(step)
    if current:
        out.append(current)
    return out


@pytest.mark.parametrize("params", [{"buckets": 100}, {"buckets": 2000}, {"start": 1000, "end": 1500, "buckets": 500}],
                         ids=["wide", "whole run, raw", "zoomed on the restart"])
def test_the_band_breaks_at_the_restart_and_stops_where_the_current_attempt_is(rewound, params):
    resolution, drawn = band(rewound, **params)
    assert drawn["rule"] == ("loss-spike" if rewound.pack else None)
    stretches = segments(drawn)
    steps = [s for stretch in stretches for s in stretch]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # step order, each step once
    assert max(steps) <= 2199, "a band over the abandoned attempt's points past step 2199"
    # The restart at 1200 separates two stretches: none of them joins a step before it to one after it.
    assert not any(stretch[0] < 1200 <= stretch[-1] for stretch in stretches), (resolution, stretches)
    assert any(stretch[-1] < 1200 for stretch in stretches) and any(stretch[0] >= 1200 for stretch in stretches)
