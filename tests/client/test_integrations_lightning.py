"""The PyTorch Lightning callback: metric selection and phases (with stand-ins, always), and a real
Lightning fit with the real client and health hooks (when lightning is installed)."""
import json
from types import SimpleNamespace

import pytest

from tests.client.support import closed_port, need  # noqa: F401  (puts client/ on the path)

from warninglight.integrations import lightning as wl_lightning  # imports without lightning


class Recorder:
    phases = True

    def __init__(self):
        self.logs = []
        self.phase_entries = []
        self.closed = False

    def log(self, step, metrics=None, *, component=None, **values):
        self.logs.append((step, dict(metrics or {}, **values)))

    def phase(self, name, step=None):
        self.phase_entries.append((step, name))

    def close(self):
        self.closed = True


def test_training_and_validation_values():
    metrics = {"train_loss_step": 0.5, "train_loss_epoch": 0.7, "train_loss": 0.6, "train/acc": 0.9, "val_loss": 1.2,
               "valid/f1": 0.4, "test_acc": 0.3, "lr-AdamW": 1e-3, "name": "text"}
    values = wl_lightning.training_values({"loss": 0.25}, metrics, lr=1e-3)
    assert values == {"loss": 0.25, "lr": 1e-3, "train_loss": 0.5, "train/acc": 0.9, "lr-AdamW": 1e-3}
    assert wl_lightning.validation_values(metrics) == {"val_loss": 1.2, "valid/f1": 0.4}
    assert wl_lightning.training_values(None, {}) == {}


def test_callback_logic_with_stand_ins():
    wl = Recorder()
    cb = wl_lightning._Logic(wl)
    trainer = SimpleNamespace(global_step=0, sanity_checking=True, callback_metrics={}, optimizers=[])
    cb.on_validation_start(trainer, None)  # sanity check: no phase, nothing logged
    trainer.callback_metrics = {"val_loss": 9.0}
    cb.on_validation_end(trainer, None)
    trainer.sanity_checking = False
    cb.on_train_start(trainer, None)
    for batch in range(40):  # gradient accumulation of 2: global_step moves every other batch
        trainer.global_step = (batch + 1) // 2
        trainer.callback_metrics = {"train_loss_step": float(batch)}
        cb.on_train_batch_end(trainer, None, {"loss": float(batch)}, None, batch)
        if batch == 19:
            cb.on_validation_start(trainer, None)
            trainer.callback_metrics = {"val_loss": 1.5, "train_loss_step": float(batch)}
            cb.on_validation_end(trainer, None)
            cb.on_save_checkpoint(trainer, None, {})
    cb.on_train_end(trainer, None)
    assert wl.phase_entries == [(0, "steady"), (10, "eval"), (11, "steady"), (10, "checkpoint"), (11, "steady")]
    train_logs = [(s, v) for s, v in wl.logs if "loss" in v]
    assert [s for s, _ in train_logs] == list(range(0, 21))  # once per optimizer step
    assert train_logs[3] == (3, {"loss": 5.0, "train_loss": 5.0})  # the first batch end after the step moved
    assert [(s, v) for s, v in wl.logs if "val_loss" in v] == [(10, {"val_loss": 1.5})]
    assert not wl.closed


def test_resuming_is_a_restart():
    wl = Recorder()
    cb = wl_lightning._Logic(wl)
    cb.on_train_start(SimpleNamespace(global_step=500), None)
    assert wl.phase_entries == [(501, "restart"), (511, "steady")]


def test_a_missing_lightning_is_a_clear_import_error(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "lightning", None)  # as if neither package were installed
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)
    try:
        module = importlib.reload(wl_lightning)
        assert module._Base is None
        with pytest.raises(ImportError, match="pip install lightning"):
            module.WarningLightCallback(Recorder())
    finally:
        monkeypatch.undo()
        importlib.reload(wl_lightning)


# ---------------------------------------------------------------------------------------------- real Lightning
def test_a_real_lightning_fit_sends_metrics_phases_and_health(tmp_path):
    torch = need("torch")
    pl = need("lightning.pytorch")
    from torch import nn

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))

        def forward(self, x):
            return self.body(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = nn.functional.cross_entropy(self(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=False)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", nn.functional.cross_entropy(self(x), y))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(320, 8, generator=g)
    data = torch.utils.data.TensorDataset(x, x[:, :4].argmax(-1))
    train = torch.utils.data.DataLoader(data, batch_size=8)
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(data, range(32)), batch_size=8)
    torch.manual_seed(0)
    module = Module()
    callback = wl_lightning.WarningLightCallback(run_id="pl-tiny", url=f"http://127.0.0.1:{closed_port()}", token="wl_x",
                                                 spool_dir=tmp_path / "spool", retries=0, flush_seconds=0.05,
                                                 code_rev=False)
    trainer = pl.Trainer(max_steps=30, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, val_check_interval=10, limit_val_batches=2, log_every_n_steps=3,
                         num_sanity_val_steps=0, default_root_dir=str(tmp_path), callbacks=[callback],
                         enable_checkpointing=False)
    trainer.fit(module, train, val)

    lines = [json.loads(line) for line in (tmp_path / "spool" / "pl-tiny.ndjson").read_text().splitlines()]
    assert lines[0]["type"] == "run" and lines[0]["budget"] == {"steps": 30}
    phases = [(x["step"], x["phase"]) for x in lines if x["type"] == "phase"]
    assert phases[0] == (0, "steady") and (10, "eval") in phases and (11, "steady") in phases
    points = [x for x in lines if x["type"] == "point"]
    loss_steps = [x["step"] for x in points if x["metric"] == "loss" and "component" not in x]
    assert loss_steps == list(range(1, 31))
    assert {x["step"] for x in points if x["metric"] == "val_loss"} >= {10, 20, 30}
    assert {x["step"] for x in points if x["metric"] == "train_loss"} == set(range(3, 31, 3))  # log_every_n_steps
    health = {(x["metric"], x["component"], x["step"]) for x in points if "component" in x}
    assert {c for _, c, _ in health} == {"body.0", "body.2"}
    for step in (10, 20, 30):
        for metric in ("grad_norm", "weight_norm", "update_ratio", "act_norm", "dead_fraction"):
            assert (metric, "body.0", step) in health, (metric, step)
    assert callback.wl is None
