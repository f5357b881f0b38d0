"""The Hugging Face `transformers.Trainer` callback: the log mapping and phases (with stand-ins, always),
and a real Trainer run with the real client and health hooks (when transformers is installed)."""
import json
from types import SimpleNamespace

import pytest

from tests.client.support import closed_port, need  # noqa: F401  (puts client/ on the path)

from warninglight.integrations import hf  # imports without transformers


class Recorder:
    """A watch stand-in: what the callback asks of it."""

    phases = True

    def __init__(self):
        self.logs = []  # (step, {metric: value})
        self.phase_entries = []  # (step, phase)
        self.closed = False

    def log(self, step, metrics=None, *, component=None, **values):
        self.logs.append((step, dict(metrics or {}, **values)))

    def phase(self, name, step=None):
        self.phase_entries.append((step, name))

    def event(self, *args, **kwargs):
        pass

    def close(self):
        self.closed = True


def test_trainer_logs_map_to_the_console_vocabulary():
    logs = {"loss": 2.5, "learning_rate": 3e-4, "grad_norm": 1.25, "epoch": 0.5, "eval_loss": 2.7, "eval_accuracy": 0.4,
            "eval_runtime": 1.5, "test_f1": 0.3, "train_runtime": 12.0, "train_loss": 2.4, "total_flos": 1e12,
            "note": "text", "per_class": [1, 2], "flag": True, "weird key!": 1}
    assert hf.map_logs(logs) == {"loss": 2.5, "lr": 3e-4, "grad_norm": 1.25, "epoch": 0.5, "val_loss": 2.7,
                                 "eval/accuracy": 0.4, "eval/runtime": 1.5, "test/f1": 0.3, "train/runtime": 12.0,
                                 "train/loss": 2.4, "train/total_flos": 1e12, "weird_key_": 1.0}


def test_warmup_steps_from_arguments():
    assert hf.warmup_steps(SimpleNamespace(warmup_steps=0, warmup_ratio=0.1), 100) == 10
    assert hf.warmup_steps(SimpleNamespace(warmup_steps=7, warmup_ratio=0.0), 100) == 7
    assert hf.warmup_steps(SimpleNamespace(warmup_steps=0, warmup_ratio=0.0), 100) == 0


def _drive(cb, steps=30, warmup=5, start=0, evals=(10, 20), saves=(15,)):
    args = SimpleNamespace(warmup_steps=warmup, warmup_ratio=0.0, run_name=None, output_dir="/tmp/x")
    state = SimpleNamespace(global_step=start, max_steps=steps)
    cb.on_train_begin(args, state, None, model=None, optimizer=None)
    for step in range(start + 1, steps + 1):
        cb.on_optimizer_step(args, state, None)
        state.global_step = step
        cb.on_step_end(args, state, None)
        if step % 5 == 0:
            cb.on_log(args, state, None, logs={"loss": 1.0 / step, "learning_rate": 1e-3, "epoch": step / 30})
        if step in evals:
            cb.on_log(args, state, None, logs={"eval_loss": 2.0, "eval_runtime": 0.1, "epoch": step / 30})
            cb.on_evaluate(args, state, None, metrics={"eval_loss": 2.0})
        if step in saves:
            cb.on_save(args, state, None)
    cb.on_train_end(args, state, None)


def test_callback_logic_with_a_running_watch():
    wl = Recorder()
    cb = hf._Logic(wl)
    _drive(cb)
    assert wl.phase_entries == [(0, "warmup"), (6, "steady"), (10, "eval"), (11, "steady"), (15, "checkpoint"),
                                (16, "steady"), (20, "eval"), (21, "steady")]
    # one empty run-level log per optimizer step (it runs the health hooks), then the mapped logs
    assert [s for s, values in wl.logs if not values] == list(range(1, 31))
    assert [(s, v) for s, v in wl.logs if v][:3] == [(5, {"loss": 0.2, "lr": 1e-3, "epoch": 5 / 30}),
                                                     (10, {"loss": 0.1, "lr": 1e-3, "epoch": 10 / 30}),
                                                     (10, {"val_loss": 2.0, "eval/runtime": 0.1, "epoch": 10 / 30})]
    assert not wl.closed  # a watch of the user's own is never closed


def test_callback_logic_resuming_and_eval_during_warmup():
    wl = Recorder()
    _drive(hf._Logic(wl), steps=40, warmup=30, start=12, evals=(20,), saves=())
    assert wl.phase_entries == [(13, "restart"), (23, "warmup"), (20, "eval"), (21, "warmup"), (31, "steady")]


def test_callback_logic_without_phases():
    wl = Recorder()
    wl.phases = False
    _drive(hf._Logic(wl))
    assert wl.phase_entries == []


def test_a_missing_transformers_is_a_clear_import_error(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    try:
        module = importlib.reload(hf)
        assert module._Base is None and module.map_logs({"loss": 1}) == {"loss": 1.0}
        with pytest.raises(ImportError, match="pip install transformers"):
            module.WarningLightCallback(Recorder())
    finally:
        monkeypatch.undo()
        importlib.reload(hf)


# ---------------------------------------------------------------------------------------------- real Trainer
def test_a_real_trainer_run_sends_logs_phases_and_health(tmp_path):
    transformers = need("transformers")
    torch = need("torch")
    from torch import nn

    class TinyClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))

        def forward(self, x, labels=None):
            logits = self.body(x)
            loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
            return {"loss": loss, "logits": logits}

    class Data(torch.utils.data.Dataset):
        def __init__(self, n, seed):
            g = torch.Generator().manual_seed(seed)
            self.x = torch.randn(n, 8, generator=g)
            self.y = self.x[:, :4].argmax(-1)

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    torch.manual_seed(0)
    model = TinyClassifier()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=30, per_device_train_batch_size=8, learning_rate=1e-2,
        warmup_steps=5, logging_steps=5, eval_strategy="steps", eval_steps=10, save_strategy="steps", save_steps=15,
        report_to=[], use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0,
        remove_unused_columns=False)
    callback = hf.WarningLightCallback(run_id="hf-tiny", url=f"http://127.0.0.1:{closed_port()}", token="wl_x",
                                       spool_dir=tmp_path / "spool", retries=0, flush_seconds=0.05, code_rev=False)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Data(400, 1), eval_dataset=Data(32, 2),
                                   callbacks=[callback])
    trainer.train()

    lines = [json.loads(x) for x in (tmp_path / "spool" / "hf-tiny.ndjson").read_text().splitlines()]
    run = lines[0]
    assert run["type"] == "run" and run["budget"] == {"steps": 30} and run["config"]["learning_rate"] == 1e-2
    phases = [(x["step"], x["phase"]) for x in lines if x["type"] == "phase"]
    assert phases[:2] == [(0, "warmup"), (6, "steady")]
    assert (10, "eval") in phases and (15, "checkpoint") in phases and (30, "eval") in phases
    points = [x for x in lines if x["type"] == "point"]
    run_level = {(x["metric"], x["step"]) for x in points if "component" not in x}
    assert {("loss", 5), ("lr", 5), ("grad_norm", 5), ("val_loss", 10), ("val_loss", 30)} <= run_level
    health = {(x["metric"], x["component"], x["step"]) for x in points if "component" in x}
    components = {c for _, c, _ in health}
    assert components == {"body.0", "body.2"}
    for step in (10, 20, 30):  # health every 10 steps, gradients measured before zero_grad
        for metric in ("grad_norm", "weight_norm", "update_ratio", "act_norm", "dead_fraction"):
            assert (metric, "body.0", step) in health, (metric, step)
    grad = [x["value"] for x in points if x["metric"] == "grad_norm" and x.get("component") == "body.0"]
    assert all(isinstance(v, float) and v > 0 for v in grad)
    assert not [x for x in lines if x["type"] == "event"]  # a healthy run
    assert callback.wl is None  # opened by the callback, closed at the end of training


def test_the_step_loss_combines_the_micro_batches_of_an_accumulated_step():
    torch = need("torch")

    class Model(torch.nn.Module):
        def forward(self, x, num_items_in_batch=None):
            return {"loss": x.sum() if num_items_in_batch is None else x.sum() / num_items_in_batch}

    wl = Recorder()
    cb = hf._Logic(wl)
    model = Model()
    args = SimpleNamespace(warmup_steps=0, warmup_ratio=0.0, logging_nan_inf_filter=True)
    state = SimpleNamespace(global_step=0, max_steps=10)
    cb.on_train_begin(args, state, None, model=model)
    for x in (1.0, 3.0):  # two micro-batches, each a mean over its own batch
        model(torch.tensor([x]))
    model.eval()
    model(torch.tensor([100.0]))  # an evaluation pass is not a training loss
    model.train()
    cb.on_optimizer_step(args, state, None)
    state.global_step = 1
    for x in (1.0, 3.0):  # normalised by the Trainer's num_items_in_batch over the whole step: summed
        model(torch.tensor([x]), num_items_in_batch=4)
    cb.on_optimizer_step(args, state, None)
    cb.on_train_end(args, state, None)
    assert [(s, float(v["loss"])) for s, v in wl.logs] == [(1, 2.0), (2, 1.0)]
    assert not model._forward_hooks  # the hook is removed at the end of training
