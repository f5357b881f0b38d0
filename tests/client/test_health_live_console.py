"""The issue's end-to-end test: a tiny real PyTorch training run on CPU with a NaN injected into one
layer, watched by the real client with `model=`, against a live console started by the test (uvicorn
serving the real ASGI app in this process, the project's starter pack installed).

* Console up: the alerts read back from `GET /api/v1/alerts/?run=` name the layer: the first
  `nonfinite-weights` alert (by fired step, then id) and the `job-health-events` alert of the
  client's `unclassified` event are both on `blocks.1`, at the step of the injection.
* Console down (a closed port, spooling to tmp_path): the training loop runs at the speed of the
  same loop without any client (within 1.5x, best of 3), and the spool file imported with
  `import_jsonl` yields the same first alert (on the layer, at the injection) and the same
  `unclassified` event alert as the live run.

The health cadence is the default (every 10 steps) and the NaN is written before the forward pass of
step 150, a health step: the step's forward pass is what localizes a NaN before it spreads (client/README.md,
"Component health", says what happens between health steps).
"""
import time


from tests.client.support import need  # noqa: E402

torch = need("torch")
import torch.nn.functional as F  # noqa: E402
from django.core.management import call_command  # noqa: E402

from alerts.starter import install_starter_pack  # noqa: E402
from tests.client.support import alerts_of, closed_port  # noqa: E402
from tests.client.test_health_hooks import TinyLM, lm_batch  # noqa: E402

import warninglight  # noqa: E402

STEPS = 200
INJECT = 150
LAYER = "blocks.1"


def training(wl_options=None):
    """Train TinyLM for STEPS steps (NaN into blocks.1.fc1 before step INJECT); the loop's wall time and the watch."""
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    gen = torch.Generator().manual_seed(1)
    wl = warninglight.watch(model=model, optimizer=opt, **wl_options) if wl_options is not None else None
    started = time.perf_counter()
    for step in range(1, STEPS + 1):
        x, y = lm_batch(gen)
        if step == INJECT:
            with torch.no_grad():
                model.blocks[1].fc1.weight[7, 3] = float("nan")
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if wl is not None:
            wl.log(step, loss=loss.detach(), lr=3e-3)
    wall = time.perf_counter() - started
    return wall, wl


def summary(alerts):
    return [(a["rule"]["name"], a["component"], a.get("metric") or a.get("condition"), a["step"], a["fired_step"])
            for a in alerts]


def test_a_nan_in_one_layer_is_alerted_on_that_layer_live_and_from_the_spool_of_a_run_with_the_console_down(
        console_server, project, token, tmp_path):
    torch.set_num_threads(1)
    install_starter_pack(project)
    fast = {"token": token, "flush_seconds": 0.05, "backoff": 0.01, "retries": 1, "code_rev": False}

    # ---- console up
    _, wl = training({"run_id": "nan-live", "url": console_server.url, "spool_dir": tmp_path / "live", **fast})
    wl.close()
    assert wl.stats["spooled"] == 0 and wl.stats["rejected"] == 0 and wl.stats["dropped"] == 0
    live = alerts_of(token, "nan-live")
    first_health = next(a for a in live if a["rule"]["name"] == "nonfinite-weights")
    assert (first_health["component"], first_health["step"], first_health["fired_step"]) == (LAYER, INJECT, INJECT)
    assert first_health["metric"] == "weight_norm"  # the origin's own weights, the cause before the symptoms
    event_alerts = [a for a in live if a["rule"]["name"] == "job-health-events"]
    assert [(a["component"], a["condition"], a["step"]) for a in event_alerts] == [(LAYER, "unclassified", INJECT)]
    component_alerts = [a for a in live if a["component"]]
    assert component_alerts[0]["component"] == LAYER  # the first component alert of any rule
    assert not [a for a in live if a["step"] < INJECT]  # nothing before the fault

    # ---- console down: timing against the same loop without a client (best of 3, alternating)
    plain, down = [], []
    for i in range(3):
        plain.append(training(None)[0])
        wall, wl = training({"run_id": "nan-down" if i == 0 else f"nan-down-{i}", "url": f"http://127.0.0.1:{closed_port()}",
                             "spool_dir": tmp_path / f"down{i}", **fast})
        down.append(wall)
        closing = time.perf_counter()
        wl.close()
        assert time.perf_counter() - closing < 5
        assert wl.stats["spooled"] > 0 and wl.stats["console_down"]
        if i == 0:
            spool = wl.spool_path
            stats = wl.stats
    print(f"\nloop wall time, best of 3: no client {min(plain) * 1000:.0f} ms, client with the console down "
          f"{min(down) * 1000:.0f} ms (ratio {min(down) / min(plain):.2f}); spooled {stats['spooled']} items")
    assert min(down) <= 1.5 * min(plain) + 0.05, (plain, down)
    assert stats["dropped"] == 0 and stats["rejected"] == 0

    # ---- the spool, imported later, yields the same alerts at the fault
    call_command("import_jsonl", str(spool), token=token)
    spooled = alerts_of(token, "nan-down")
    assert summary(spooled)[0] == summary(live)[0] == ("nonfinite-weights", LAYER, "weight_norm", INJECT, INJECT)

    def events(alerts):
        return [(a["component"], a["condition"], a["step"]) for a in alerts if a["rule"]["name"] == "job-health-events"]

    def alerted(alerts):
        return {a["component"] for a in alerts if a["rule"]["name"] == "nonfinite-weights"}

    assert events(spooled) == events(live) == [(LAYER, "unclassified", INJECT)]
    assert alerted(spooled) == alerted(live) == {"tok", "pos", "blocks.0", LAYER, "ln", "head"}
    # The other rows can differ with the batching (the live run arrived in ~0.05 s batches, the spool in one
    # request): the console judges a batch metric by metric across all its steps, so when one batch holds steps 150
    # and 160, tok's NaN weight_norm at 160 opens tok's alert before its NaN grad_norm at 150 is seen, and the alert
    # says 160 (see the report on alerts/evaluation.py). The first alert and the events do not depend on it.
