"""Per-component health (`warninglight.health`): read-only, components, cadence, the eight conditions.

Small real PyTorch models trained on CPU with synthetic data and fixed seeds. Most tests drive
`Health` directly with a fake watch that records what it is given; the read-only test goes through
the real client (pointed at a closed port, spooling to tmp_path) so the watcher's own call path
is covered too.
"""
import logging
import math

import pytest

from tests.client.support import need  # noqa: E402

torch = need("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tests.client.support import closed_port  # noqa: E402  (puts client/ on the path)

import warninglight  # noqa: E402
from warninglight import health as health_mod  # noqa: E402
from warninglight.health import Health, discover_components  # noqa: E402

VOCAB, SEQ, D = 16, 12, 32


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class FakeWatch:
    phases = True

    def __init__(self):
        self.points = []  # (step, metric, component, value)
        self.events = []  # (step, component, condition, magnitude, detail)

    def _health_points(self, step, points):
        self.points.extend((step, m, c, v) for m, c, v in points)

    def event(self, step, component, condition, magnitude, detail=None):
        self.events.append((step, component, condition, magnitude, detail))

    def series(self, metric, component):
        return {s: v for s, m, c, v in self.points if m == metric and c == component}

    def conditions(self):
        return [(s, c, cond) for s, c, cond, _, _ in self.events]


# ---------------------------------------------------------------------------------------------- models
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 4, dropout=0.1, batch_first=True)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * D, D)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.ln1(x)
        mask = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), 1)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + self.drop(a)
        return x + self.drop(self.fc2(self.act(self.fc1(self.ln2(x)))))


class TinyLM(nn.Module):
    """A 2-block pre-LN transformer language model (tok/pos embeddings, blocks, final norm, head)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ, D)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def mlp(act=nn.ReLU):
    return nn.Sequential(nn.Linear(8, 32), act(), nn.Dropout(0.1), nn.Linear(32, 32), act(), nn.Linear(32, 4))


def lm_batch(gen):
    x = torch.randint(0, VOCAB, (8, SEQ), generator=gen)
    return x, (x * 3 + 1) % VOCAB  # a learnable mapping: the model becomes confident


def mlp_batch(gen):
    x = torch.randn(16, 8, generator=gen)
    return x, (x[:, :4] * 2).argmax(-1)


def train(make_model, steps, *, seed=0, every=1, optimizer=True, wl=None, with_health=True, before_forward=None,
          after_backward=None, lr=3e-3, groups=None, real_client=None):
    """Train `steps` AdamW steps; returns (model, optimizer, fake watch or None)."""
    torch.manual_seed(seed)
    model = make_model()
    params = groups(model) if groups else model.parameters()
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.1)
    gen = torch.Generator().manual_seed(seed + 1)
    batch = lm_batch if isinstance(model, TinyLM) else mlp_batch
    fake = None
    health = None
    if real_client is not None:
        wl = warninglight.watch(model=model if with_health else None, optimizer=opt if optimizer else None,
                                health_every=every, **real_client)
    elif with_health:
        fake = wl or FakeWatch()
        health = Health(fake, model, every=every, optimizer=opt if optimizer else None)
    for step in range(1, steps + 1):
        x, y = batch(gen)
        if before_forward:
            before_forward(step, model, opt)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if after_backward:
            after_backward(step, model)
        opt.step()
        if real_client is not None:
            wl.log(step, loss=loss.item())
        elif health is not None:
            health.on_log(step, {"loss": loss.item()})
    if real_client is not None:
        wl.close()
    elif health is not None:
        health.close()
    return model, opt, fake


def state_tensors(opt):
    out = []
    for state in opt.state_dict()["state"].values():
        out.extend(v for _, v in sorted(state.items()) if torch.is_tensor(v))
    return out


# ---------------------------------------------------------------------------------------------- read-only
@pytest.mark.parametrize("make_model", [TinyLM, mlp], ids=["transformer", "mlp"])
@pytest.mark.parametrize("every,optimizer", [(1, True), (1, False), (3, True)])
def test_health_is_read_only(make_model, every, optimizer, tmp_path):
    """Weights, gradients, optimizer state and the RNG are bit-identical with and without health (real client)."""
    client = {"run_id": "ro", "url": f"http://127.0.0.1:{closed_port()}", "token": "wl_x", "spool_dir": tmp_path,
              "flush_seconds": 0.05, "backoff": 0.01, "retries": 0, "code_rev": False}
    plain_model, plain_opt, _ = train(make_model, 40, every=every, optimizer=optimizer, real_client=client, with_health=False)
    plain_rng = torch.get_rng_state()
    watched_model, watched_opt, _ = train(make_model, 40, every=every, optimizer=optimizer,
                                          real_client=dict(client, run_id="ro-watched"))
    watched_rng = torch.get_rng_state()
    assert torch.equal(plain_rng, watched_rng)
    for (name, a), (_, b) in zip(plain_model.named_parameters(), watched_model.named_parameters()):
        assert torch.equal(a, b), name
        assert torch.equal(a.grad, b.grad), name
        assert a.requires_grad == b.requires_grad
    plain_state, watched_state = state_tensors(plain_opt), state_tensors(watched_opt)
    assert len(plain_state) == len(watched_state) > 0
    assert all(torch.equal(a, b) for a, b in zip(plain_state, watched_state))
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in watched_model.modules())  # all removed at close
    assert not watched_opt._optimizer_step_pre_hooks
    # and health really ran: its points are in the spool
    spooled = (tmp_path / "ro-watched.ndjson").read_text()
    assert '"metric":"update_ratio"' in spooled.replace(" ", "") and '"metric":"act_norm"' in spooled.replace(" ", "")


# ---------------------------------------------------------------------------------------------- components
def test_default_components_sequential_mlp_and_transformer():
    assert [n for n, _, _ in discover_components(mlp())] == ["0", "3", "5"]
    assert [n for n, _, _ in discover_components(TinyLM())] == ["tok", "pos", "blocks.0", "blocks.1", "ln", "head"]
    assert [n for n, _, _ in discover_components(TinyLM(), names=["blocks.1", "head", "nope"])] == ["blocks.1", "head"]
    tied = TinyLM()
    tied.head.weight = tied.tok.weight  # tied embeddings: the shared tensor belongs to the first owner
    comps = {n: p for n, _, p in discover_components(tied)}
    assert sum(1 for p in comps["tok"] if p is tied.tok.weight) == 1 and all(p is not tied.tok.weight for p in comps["head"])


def test_many_blocks_are_grouped_under_the_limit():
    deep = nn.Sequential(nn.Embedding(10, 8), *[nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)) for _ in range(100)],
                         nn.Linear(8, 10))
    names = [n for n, _, _ in discover_components(deep, max_components=64)]
    assert len(names) <= 64 and names[0] == "0" and names[-1] == "101"
    assert names[1] == "1-2" and "99-100" in names
    params = sum(len(p) for _, _, p in discover_components(deep, max_components=64))
    assert params == len(list(deep.parameters()))


def test_activations_are_attributed_to_the_layer_before_them_or_the_block_holding_them():
    h = Health(FakeWatch(), mlp(), every=1)
    acts = {c.name: [type(m).__name__ for m, _ in c.activations] for c in h.components}
    assert acts == {"0": ["ReLU"], "3": ["ReLU"], "5": []}  # Linear -> (Dropout skipped) -> ReLU
    h = Health(FakeWatch(), TinyLM(), every=1)
    acts = {c.name: [type(m).__name__ for m, _ in c.activations] for c in h.components}
    assert acts["blocks.0"] == ["GELU"] and acts["head"] == []


# ---------------------------------------------------------------------------------------------- cadence
def test_cadence_every_10_measures_the_step_itself_and_registers_no_hooks_between():
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    wl = FakeWatch()
    h = Health(wl, model, every=10, optimizer=opt)
    gen = torch.Generator().manual_seed(1)
    hooked = {}
    for step in range(1, 31):
        hooked[step] = sum(len(m._forward_hooks) for m in model.modules())
        x, y = mlp_batch(gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        before = model[3].weight.detach().clone(), model[3].bias.detach().clone()
        opt.step()
        h.on_log(step, {"loss": loss.item()})
        if step == 20:
            delta = math.sqrt(((model[3].weight.detach() - before[0]) ** 2).sum() + ((model[3].bias.detach() - before[1]) ** 2).sum())
            expected_ratio = delta / math.sqrt((before[0] ** 2).sum() + (before[1] ** 2).sum())
            expected_grad = math.sqrt((model[3].weight.grad ** 2).sum() + (model[3].bias.grad ** 2).sum())
    assert sorted({s for s, *_ in wl.points}) == [10, 20, 30]
    # hooks exist only for the forward pass of a health step (armed by the log just before it); step 1 is armed
    # from the start (the first log could be a health step)
    assert [s for s, n in hooked.items() if n] == [1, 10, 20, 30]
    assert wl.series("update_ratio", "3")[20] == pytest.approx(expected_ratio, rel=1e-4)
    assert wl.series("grad_norm", "3")[20] == pytest.approx(expected_grad, rel=1e-5)
    assert {m for _, m, c, _ in wl.points if c == "3"} == {"weight_norm", "act_norm", "act_max", "dead_fraction",
                                                            "grad_norm", "update_ratio"}
    h.close()
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_sparse_logging_measures_at_the_first_log_past_each_multiple():
    wl = FakeWatch()
    _, _, wl = train(mlp, 40, every=10, wl=wl, before_forward=None)
    assert sorted({s for s, *_ in wl.points}) == [10, 20, 30, 40]
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    wl = FakeWatch()
    h = Health(wl, model, every=10)  # no optimizer: update_ratio from the weights since the arming log
    gen = torch.Generator().manual_seed(1)
    for step in range(1, 41):
        x, y = mlp_batch(gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 3 == 0:  # logs every 3 steps: 3, 6, 9, 12, ...
            h.on_log(step)
    # 12: first log past 10 (armed by the log at 9, whose next log, 12, would pass 10), 21, 30; at 39 the next
    # multiple (40) is armed for but no log past it comes
    assert sorted({s for s, *_ in wl.points}) == [12, 21, 30]
    assert all(v > 0 for v in wl.series("update_ratio", "0").values())
    assert set(wl.series("act_norm", "0")) == {12, 21, 30}  # the forward after the arming log (2 steps stale at most)


def test_eval_forward_passes_are_not_captured():
    torch.manual_seed(0)
    model = mlp()
    wl = FakeWatch()
    h = Health(wl, model, every=1)
    model.eval()
    with torch.no_grad():
        model(torch.randn(4, 8) * 1000)
    model.train()
    x = torch.randn(4, 8)
    model(x).sum().backward()
    h.on_log(1)
    expected = torch.linalg.vector_norm(model[0](x), dim=-1).mean().item()
    assert wl.series("act_norm", "0")[1] == pytest.approx(expected, rel=1e-5)


# ---------------------------------------------------------------------------------------------- conditions
def test_a_normal_run_reports_no_condition():
    _, _, wl = train(TinyLM, 300, every=1)
    assert wl.events == []
    _, _, wl = train(mlp, 300, every=1)
    assert wl.events == []


def test_a_dead_layer_reports_dead_naming_it():
    def kill(step, model, opt):
        if step == 30:
            with torch.no_grad():
                model[3].weight.zero_()
                model[3].bias.zero_()
            for p in (model[3].weight, model[3].bias):
                for v in opt.state[p].values():
                    if torch.is_tensor(v) and v.dim():
                        v.zero_()

    _, _, wl = train(mlp, 50, every=1, before_forward=kill)
    dead = [e for e in wl.events if e[2] == "dead"]
    assert [(s, c) for s, c, *_ in dead] == [(31, "3")]  # two health steps in a row: 30, 31
    assert dead[0][3] == 1.0
    assert wl.series("dead_fraction", "3")[30] == 1.0 and wl.series("dead_fraction", "3")[29] < 0.5
    # no gradient passes a dead ReLU layer: neither to it nor to the layer before it
    assert {(c, cond) for _, c, cond, *_ in wl.events} == {("3", "dead"), ("3", "lost_gradient"), ("3", "stagnant"),
                                                          ("0", "lost_gradient")}


def test_a_nan_in_one_layers_weights_reports_unclassified_naming_that_layer_first():
    def poison(step, model, opt):
        if step == 25:
            with torch.no_grad():
                model.blocks[1].fc1.weight[3, 5] = float("nan")

    _, _, wl = train(TinyLM, 30, every=1, before_forward=poison)
    first = wl.events[0]
    assert first[:3] == (25, "blocks.1", "unclassified")
    assert first[3] == 3.0 and first[4]["origin_known"]  # blocks.1, ln and head went non-finite in that forward pass
    assert [e[2] for e in wl.events].count("unclassified") == 1  # once per episode
    # the weights that step's forward pass used: only blocks.1's are NaN at step 25, everything's from 26
    w25 = {c: v for s, m, c, v in wl.points if s == 25 and m == "weight_norm"}
    assert [c for c, v in w25.items() if math.isnan(v)] == ["blocks.1"]
    # components are in forward order: the first non-finite activation is the origin's
    acts = [(c, v) for s, m, c, v in wl.points if s == 25 and m == "act_norm"]
    assert [c for c, _ in acts] == ["tok", "pos", "blocks.0", "blocks.1", "ln", "head"]
    assert [c for c, v in acts if not math.isfinite(v)] == ["blocks.1", "ln", "head"]
    # from step 26 every component's weights are NaN: no second unclassified, and NaN activations are not "dead"
    assert not [e for e in wl.events if e[2] == "dead"]
    assert not [e for e in wl.events if e[2] == "lost_gradient"]  # the loss is NaN: not a lost gradient


def test_exploding_gradients_report_exploding():
    def blow(step, model):
        if step >= 40:
            for p in model.blocks[0].parameters():
                p.grad.mul_(1000.0)

    _, _, wl = train(TinyLM, 45, every=1, after_backward=blow)
    exploding = [e for e in wl.events if e[2] == "exploding"]
    assert [(s, c) for s, c, *_ in exploding] == [(40, "blocks.0")]
    assert exploding[0][3] > 100


def test_a_frozen_layer_reports_stagnant():
    def groups(model):
        return [{"params": [p for n, p in model.named_parameters() if not n.startswith("blocks.1.")]},
                {"params": list(model.blocks[1].parameters())}]

    def freeze(step, model, opt):
        if step == 20:
            opt.param_groups[1]["lr"] = 0.0

    _, _, wl = train(TinyLM, 30, every=1, before_forward=freeze, groups=groups)
    assert [(s, c, cond) for s, c, cond, *_ in wl.events] == [(21, "blocks.1", "stagnant")]
    assert wl.series("update_ratio", "blocks.1")[20] == 0.0


def test_requires_grad_off_midrun_reports_stagnant_but_a_component_frozen_from_the_start_does_not():
    def freeze(step, model, opt):
        if step == 20:
            model[3].requires_grad_(False)

    _, _, wl = train(mlp, 30, every=1, before_forward=freeze)
    assert [(s, c, cond) for s, c, cond, *_ in wl.events] == [(21, "3", "stagnant")]

    def frozen_mlp():
        m = mlp()
        m[0].requires_grad_(False)  # fine-tuning: frozen on purpose
        return m

    _, _, wl = train(frozen_mlp, 30, every=1)
    assert wl.events == [] and wl.series("update_ratio", "0")[10] == 0.0


def test_a_detached_component_reports_lost_gradient():
    class Detaching(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp()
            self.cut = False

        def forward(self, x):
            h = self.net[1](self.net[0](x))
            if self.cut:
                h = h.detach()  # a bug: nothing before this point learns any more
            return self.net[5](self.net[4](self.net[3](h)))

    def cut(step, model, opt):
        model.cut = step >= 20

    _, _, wl = train(Detaching, 30, every=1, before_forward=cut)
    assert [(s, c, cond) for s, c, cond, *_ in wl.events][:1] == [(21, "net.0", "lost_gradient")]
    assert wl.events[0][3] == 1.0  # every trainable tensor of it has no gradient


def test_oscillating_gradients_report_oscillating():
    def zigzag(step, model):
        if step >= 30:
            for p in model[3].parameters():
                p.grad.mul_(6.0 if step % 2 else 1.0)

    _, _, wl = train(mlp, 60, every=1, after_backward=zigzag)
    osc = [e for e in wl.events if e[2] == "oscillating"]
    # fires once the 16-value window is (nearly) all zig-zag: by step 45 (30..45) at the latest
    assert len(osc) == 1 and osc[0][1] == "3" and 41 <= osc[0][0] <= 45
    assert osc[0][3] >= 0.5


def test_saturated_tanh_reports_saturated():
    def scale(step, model, opt):
        if step == 20:
            with torch.no_grad():
                model[0].weight.mul_(100.0)

    _, _, wl = train(lambda: mlp(nn.Tanh), 25, every=1, before_forward=scale)
    sat = [e for e in wl.events if e[2] == "saturated"]
    assert [(s, c) for s, c, *_ in sat] == [(21, "0")] and sat[0][3] >= 0.5


def test_collapsed_output_distribution_reports_low_confidence():
    def collapse(step, model, opt):
        if step == 120:
            with torch.no_grad():
                model.head.weight.zero_()
                model.head.bias.zero_()

    _, _, wl = train(TinyLM, 125, every=1, before_forward=collapse, lr=1e-2)
    low = [e for e in wl.events if e[2] == "low_confidence"]
    assert [(s, c) for s, c, *_ in low] == [(121, "head")] and low[0][3] > 0.98


def test_conditions_fire_once_per_onset_and_rearm():
    h = Health(FakeWatch(), mlp(), every=1)
    c = h.components[0]
    events = []
    for held in [True, True, True, False, True, True]:
        h._judge(c, "dead", held, 2, events, "dead", 1.0, None)
    assert len(events) == 2


# ---------------------------------------------------------------------------------------------- failures
def test_an_internal_error_switches_health_off_with_one_warning_and_training_goes_on(monkeypatch, caplog):
    calls = {"n": 0}
    real = health_mod._norm

    def broken(tensors):
        calls["n"] += 1
        if calls["n"] > 20:
            raise RuntimeError("boom")
        return real(tensors)

    monkeypatch.setattr(health_mod, "_norm", broken)
    with caplog.at_level(logging.WARNING, logger="warninglight"):
        model, opt, wl = train(mlp, 20, every=1)
    warnings = [r for r in caplog.records if "switched off" in r.getMessage()]
    assert len(warnings) == 1
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert not opt._optimizer_step_pre_hooks
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_no_gradients_at_log_time_is_said_once_and_grad_norm_left_out(caplog):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    wl = FakeWatch()
    h = Health(wl, model, every=1, optimizer=opt)
    with caplog.at_level(logging.WARNING, logger="warninglight"):
        for step in range(1, 6):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()  # before the log: the gradients are gone
            h.on_log(step)
    assert not [p for p in wl.points if p[1] == "grad_norm"] and wl.events == []
    assert len([r for r in caplog.records if "no gradients" in r.getMessage()]) == 1
