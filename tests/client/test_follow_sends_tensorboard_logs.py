"""`warninglight follow DIR` sends what SummaryWriter and Lightning's TensorBoardLogger wrote, named by the
documented tag rule, and a second run of the command sends nothing twice."""
import pytest

from tests.client.follow_support import f32, follow_command, write_scalars
from tests.client.support import need, read_json, read_points

torch = need("torch")
need("tensorboard")

from warninglight.follow import Follower, map_tag  # noqa: E402


@pytest.mark.parametrize("tag, expected", [
    ("grad_norm/layers.3", ("grad_norm", "layers.3", None)),
    ("train/loss", ("loss", None, "train")),  # the Trainer's report_to="tensorboard"
    ("train/learning_rate", ("lr", None, "train")),
    ("train/grad_norm", ("grad_norm", None, "train")),
    ("train/grad_norm/layers.3", ("grad_norm", "layers.3", "train")),
    ("eval/loss", ("val_loss", None, "eval")),
    ("eval/accuracy", ("eval/accuracy", None, "eval")),
    ("train_loss", ("loss", None, "train")),  # Lightning's self.log names
    ("train_loss_step", ("loss", None, "train")),
    ("val_loss", ("val_loss", None, "eval")),
    ("val_acc", ("eval/acc", None, "eval")),
    ("Loss/train", ("loss", None, "train")),  # PyTorch's tutorial style
    ("Loss/test", ("test/Loss", None, "test")),
    ("epoch", ("epoch", None, None)),
    ("lr-AdamW", ("lr-AdamW", None, None)),
    ("weird tag!", ("weird_tag_", None, None)),
])
def test_the_tag_rule(tag, expected):
    assert map_tag(tag) == expected


def test_summary_writer_logs_after_the_fact_then_nothing_twice(console_server, token, tmp_path):
    logs = tmp_path / "runs"
    scalars = []
    for step in range(0, 40, 2):
        scalars += [(step, "train/loss", 3.0 - step / 20), (step, "train/learning_rate", 1e-3),
                    (step, "grad_norm/layers.3", step / 10)]
        if step % 10 == 0:
            scalars += [(step, "eval/loss", 2.5 - step / 40), (step, "eval/accuracy", step / 40)]
    write_scalars(logs / "exp-1", scalars).close()

    done = follow_command(logs, "--once", "--spool-dir", tmp_path / "spool", url=console_server.url, token=token)
    assert done.returncode == 0, done.stderr
    assert "1 runs, 68 points read, 68 accepted by the console" in done.stderr

    assert read_points(token, "exp-1", "loss") == [{"step": s, "value": f32(3.0 - s / 20)} for s in range(0, 40, 2)]
    assert [p["value"] for p in read_points(token, "exp-1", "lr")] == [f32(1e-3)] * 20
    assert read_points(token, "exp-1", "grad_norm", component="layers.3") == [
        {"step": s, "value": f32(s / 10)} for s in range(0, 40, 2)]
    assert read_points(token, "exp-1", "val_loss") == [{"step": s, "value": f32(2.5 - s / 40)} for s in range(0, 40, 10)]
    assert [p["step"] for p in read_points(token, "exp-1", "eval/accuracy")] == [0, 10, 20, 30]
    run = read_json(token, "/api/v1/runs/exp-1/")
    assert run["attempt"] == 1
    assert {(p["step"], p["phase"]) for p in run["phases"]} >= {(10, "eval"), (11, "steady"), (30, "eval")}

    again = follow_command(logs, "--once", "--spool-dir", tmp_path / "spool", url=console_server.url, token=token)
    assert again.returncode == 0, again.stderr
    assert "0 points read" in again.stderr  # the state file says where the last one stopped
    assert read_json(token, "/api/v1/runs/exp-1/")["attempt"] == 1
    assert len(read_points(token, "exp-1", "loss", attempt="all")) == 20


def test_a_lightning_fit_logged_by_tensorboard_logger(console_server, token, tmp_path):
    pl = need("lightning.pytorch")
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    logger = TensorBoardLogger(save_dir=str(tmp_path / "tb"), name="tiny")
    trainer = pl.Trainer(max_steps=32, accelerator="cpu", logger=logger, log_every_n_steps=4, val_check_interval=8,
                         limit_val_batches=2, num_sanity_val_steps=0, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(Tiny(), loader, loader)

    follower = Follower(tmp_path / "tb", console_server.url, token, spool_dir=tmp_path / "spool", flush_seconds=0.05)
    follower.follow(once=True)
    follower.close()
    assert follower.stats()["spooled"] == 0

    # what TensorBoard itself shows, read by its own accumulator
    shown = EventAccumulator(logger.log_dir)
    shown.Reload()
    expected_loss = [{"step": e.step, "value": f32(e.value)} for e in shown.Scalars("train_loss")]
    expected_val = [{"step": e.step, "value": f32(e.value)} for e in shown.Scalars("val_loss")]
    assert len(expected_loss) == 8 and len(expected_val) == 4
    assert read_points(token, "tiny/version_0", "loss") == expected_loss
    assert read_points(token, "tiny/version_0", "val_loss") == expected_val
    run = read_json(token, "/api/v1/runs/tiny/version_0/")
    # `epoch` comes again with every validation log at the same step: a repeat, never a restart
    assert run["attempt"] == 1 and [a["rewind"] for a in run["attempts"]] in ([], [None])
    assert {p["phase"] for p in run["phases"]} >= {"eval"}
