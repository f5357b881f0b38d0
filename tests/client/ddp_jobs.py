"""Multi-process training jobs for tests/client/test_multi_process_training.py, run as real processes on CPU
(gloo): `python -m torch.distributed.run --nproc_per_node 2 ddp_jobs.py loop|hf OUT`, and
`python ddp_jobs.py lightning OUT` (Lightning's own `strategy="ddp"` launcher starts the second process).

The console's url and token come from WARNINGLIGHT_URL / WARNINGLIGHT_TOKEN; each rank writes what its
watch was and did to OUT/<job>.rank<N>.json. Nothing is downloaded: the models are built here.
"""
import json
import math
import os
import sys
from pathlib import Path

import torch
from torch import nn

STEPS = 20
NAN_RANK, NAN_STEP = 1, 12  # the loop's per-rank run: a NaN written into rank 1's layers.1 before step 12


class MLP(nn.Module):
    """433 parameters: three blocks (components layers.0-2) and a head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([nn.Sequential(nn.Linear(i, 12), nn.Tanh()) for i in (8, 12, 12)])
        self.head = nn.Linear(12, 1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def batch(generator, n=16):
    x = torch.randn(n, 8, generator=generator)
    return x, x[:, :4].sum(1, keepdim=True) * 0.3


def report(out, job, rank, wl):
    stats = getattr(wl, "stats", None) or {}
    Path(out, f"{job}.rank{rank}.json").write_text(json.dumps({
        "sending": getattr(wl, "sending", True), "per_rank": getattr(wl, "per_rank", False),
        "requests": stats.get("requests", 0), "sent_points": stats.get("sent_points", 0),
        "spool_path": str(wl.spool_path) if getattr(wl, "spool_path", None) else None}))


def loop(out):
    import torch.distributed as dist
    import warninglight

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for run_id, per_rank in (("ddp-loop", False), ("ddp-loop-ranks", True)):
        model = MLP()
        ddp = nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
        generator = torch.Generator().manual_seed(100 + rank)
        with warninglight.watch(run_id, model=model, optimizer=optimizer, health_every=4, per_rank=per_rank,
                                flush_seconds=0.05, code_rev=False, spool_dir=Path(out, "spool")) as wl:
            wl.phase("steady", 0)
            for step in range(1, STEPS + 1):
                if per_rank and rank == NAN_RANK and step == NAN_STEP:
                    with torch.no_grad():
                        model.layers[1][0].weight[2, 3] = math.nan
                x, y = batch(generator)
                loss = nn.functional.mse_loss(ddp(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                wl.log(step, loss=loss, lr=0.05)
        report(out, run_id, rank, wl)
        dist.barrier()
    dist.destroy_process_group()


def tiny_gpt2(transformers):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, n_positions=16, vocab_size=32, bos_token_id=0,
                                     eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


class Tokens(torch.utils.data.Dataset):
    """Rows counting up from a random start by a random stride (mod 32): learnt quickly."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, 32, (n, 1), generator=g)
        stride = torch.randint(1, 4, (n, 1), generator=g)
        self.rows = (start + stride * torch.arange(16)) % 32

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def hf(out):
    import transformers
    from warninglight.integrations.hf import WarningLightCallback

    transformers.logging.set_verbosity_error()
    args = transformers.TrainingArguments(
        output_dir=str(Path(out, "hf")), max_steps=STEPS, per_device_train_batch_size=4, learning_rate=3e-3,
        warmup_steps=4, logging_steps=5, eval_strategy="steps", eval_steps=10, save_strategy="no", report_to=[],
        use_cpu=True, ddp_backend="gloo", dataloader_num_workers=0, disable_tqdm=True, seed=0)
    callback = WarningLightCallback(run_id="ddp-hf", flush_seconds=0.05, code_rev=False, spool_dir=Path(out, "spool"))
    trainer = transformers.Trainer(model=tiny_gpt2(transformers), args=args, train_dataset=Tokens(320, 1),
                                   eval_dataset=Tokens(8, 2), callbacks=[callback])
    trainer.train()
    report(out, "ddp-hf", args.process_index, callback.wl or _Closed(callback))


class _Closed:
    """A callback's watch after on_train_end closed it: its stats."""

    def __init__(self, callback):
        self.stats = callback.stats
        self.sending = callback.stats is not None and callback.stats.get("enqueued", 0) > 0


def lightning(out):
    import lightning.pytorch as pl
    from warninglight.integrations.lightning import WarningLightCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = MLP()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", nn.functional.mse_loss(self.net(x), y), sync_dist=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    x, y = batch(torch.Generator().manual_seed(1), n=8 * STEPS)  # 2 ranks x 8 a batch: 10 steps an epoch
    data = torch.utils.data.TensorDataset(x, y)
    train = torch.utils.data.DataLoader(data, batch_size=8)
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(data, range(16)), batch_size=8)
    callback = WarningLightCallback(run_id="ddp-lightning", flush_seconds=0.05, code_rev=False,
                                    spool_dir=Path(out, "spool"))
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=STEPS, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, callbacks=[callback])
    trainer.fit(Module(), train, val)
    report(out, "ddp-lightning", trainer.global_rank, _Closed(callback))


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"loop": loop, "hf": hf, "lightning": lightning}[sys.argv[1]](sys.argv[2])
