"""A real Lightning `fit` (a tiny transformer language model) with the client's callback, against a live
console with the starter pack, read back through the console's API.

* A clean fit with validation and a checkpoint is one attempt with no rewind and no alert.
* A NaN written into one block's weights mid-fit raises `nonfinite-loss` on the training loss within 5 steps.
"""
from alerts.starter import install_starter_pack

from tests.client.support import alerts_of, need, read_json, read_points

torch = need("torch")
pl = need("lightning.pytorch")

from tests.client.test_health_hooks import VOCAB, TinyLM  # noqa: E402
from warninglight.integrations.lightning import WarningLightCallback  # noqa: E402

STEPS = 60
INJECT = 30  # the NaN is written before the forward pass of step INJECT + 1


class LM(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lm = TinyLM()

    def forward(self, x):
        return self.lm(x)

    def _loss(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x).reshape(-1, VOCAB), y.reshape(-1))

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


class InjectNaN(pl.Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == INJECT:
            with torch.no_grad():
                pl_module.lm.blocks[1].fc1.weight[3, 5] = float("nan")


def loaders():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (8 * STEPS, 12), generator=g)
    data = torch.utils.data.TensorDataset(x, (x * 3 + 1) % VOCAB)
    return (torch.utils.data.DataLoader(data, batch_size=8),
            torch.utils.data.DataLoader(torch.utils.data.Subset(data, range(16)), batch_size=8))


def fit(tmp_path, console_server, token, run_id, extra_callbacks=()):
    torch.set_num_threads(1)
    callback = WarningLightCallback(run_id=run_id, url=console_server.url, token=token, spool_dir=tmp_path / "spool",
                                    flush_seconds=0.05, code_rev=False)
    checkpoints = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / run_id, every_n_train_steps=30, save_top_k=-1)
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, val_check_interval=20, limit_val_batches=2, num_sanity_val_steps=0,
                         default_root_dir=str(tmp_path), callbacks=[callback, checkpoints, *extra_callbacks])
    train, val = loaders()
    trainer.fit(LM(), train, val)
    return callback


def test_a_clean_fit_is_one_attempt_without_alerts(console_server, project, token, tmp_path):
    install_starter_pack(project)
    fit(tmp_path, console_server, token, "pl-clean")
    run = read_json(token, "/api/v1/runs/pl-clean/")
    assert run["attempt"] == 1 and [a["rewind"] for a in run["attempts"]] in ([], [None])
    assert {(p["step"], p["phase"]) for p in run["phases"]} >= {(0, "steady"), (20, "eval"), (30, "checkpoint")}
    assert alerts_of(token, "pl-clean") == []
    assert [p["step"] for p in read_points(token, "pl-clean", "loss")] == list(range(1, STEPS + 1))
    assert [p["step"] for p in read_points(token, "pl-clean", "val_loss")] == [20, 40, 60]


def test_a_nan_in_one_block_raises_nonfinite_loss_on_the_training_loss_within_five_steps(
        console_server, project, token, tmp_path):
    install_starter_pack(project)
    fit(tmp_path, console_server, token, "pl-nan", extra_callbacks=[InjectNaN()])
    loss = {p["step"]: p["value"] for p in read_points(token, "pl-nan", "loss")}
    assert all(isinstance(loss[s], float) for s in range(1, INJECT + 1)) and loss[INJECT + 1] == "NaN"
    alerts = [a for a in alerts_of(token, "pl-nan") if a["rule"]["name"] == "nonfinite-loss"]
    assert alerts and alerts[0]["metric"] == "loss" and INJECT < alerts[0]["step"] <= INJECT + 5
    assert read_json(token, "/api/v1/runs/pl-nan/")["attempt"] == 1
