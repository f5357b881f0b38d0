"""A NaN written into one block's weights at a step between two health samples (`health_every=10`) is
named: the `unclassified` event names that block, at the step the NaN appeared, with `origin_known: true`
- in a raw loop, in the real Hugging Face Trainer and in a real Lightning fit. By the next sample every
component's weights are NaN (the optimizer spread it), which is what the health step alone would see."""
import json
import math

from tests.client.support import closed_port, need, tiny_lm_data

torch = need("torch")

from tests.client.test_health_hooks import FakeWatch, TinyLM, VOCAB, train  # noqa: E402


def spooled(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def client_options(tmp_path, run_id):
    return dict(run_id=run_id, url=f"http://127.0.0.1:{closed_port()}", token="wl_x", spool_dir=tmp_path / "spool",
                retries=0, flush_seconds=0.05, code_rev=False)


def unclassified(events):
    return [e for e in events if e["condition"] == "unclassified"]


def test_a_raw_loop_names_the_block_and_the_step_between_two_samples():
    def poison(step, model, opt):
        if step == 25:
            with torch.no_grad():
                model.blocks[1].fc1.weight[3, 5] = float("nan")

    _, _, wl = train(TinyLM, 40, every=10, before_forward=poison)
    events = [e for e in wl.events if e[2] == "unclassified"]
    assert len(events) == 1  # one episode, one event
    step, component, _, magnitude, detail = events[0]
    assert (step, component) == (25, "blocks.1")
    assert detail["origin_known"] is True and detail["nonfinite_components"] == ["blocks.1"] and magnitude == 1.0
    assert detail["seen_at_step"] == 30  # sent at the next health step
    # what the health step itself saw: every component's weights NaN, no origin in it
    w30 = {c: v for s, m, c, v in wl.points if s == 30 and m == "weight_norm"}
    assert len(w30) == 6 and all(math.isnan(v) for v in w30.values())
    assert sorted({s for s, *_ in wl.points}) == [10, 20, 30, 40]  # health steps only: the flag sends no points


def test_the_origin_is_found_without_an_optimizer_too():
    def poison(step, model, opt):
        if step == 17:
            with torch.no_grad():
                model.blocks[0].fc2.bias[0] = float("inf")

    _, _, wl = train(TinyLM, 20, every=10, optimizer=False, before_forward=poison)
    events = [e for e in wl.events if e[2] == "unclassified"]
    assert [(s, c, d["origin_known"]) for s, c, _, _, d in events] == [(17, "blocks.0", True)]


def test_the_hf_trainer_names_the_block_at_the_default_health_every(tmp_path):
    transformers = need("transformers")
    need("accelerate")
    from warninglight.integrations.hf import WarningLightCallback

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n, seed):
            self.rows = tiny_lm_data(n, seed)

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            return {"input_ids": self.rows[i], "labels": self.rows[i]}

    class InjectNaN(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, **kwargs):
            if state.global_step == 13:  # before the forward pass of step 14
                with torch.no_grad():
                    model.transformer.h[1].mlp.c_fc.weight[3, 5] = math.nan

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, n_positions=32, vocab_size=64, bos_token_id=0, eos_token_id=0))
    callback = WarningLightCallback(**client_options(tmp_path, "hf-nan"))  # health_every: the default, 10
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=25, per_device_train_batch_size=8, learning_rate=3e-3,
        logging_steps=5, save_strategy="no", eval_strategy="no", report_to=[], use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True, seed=0)
    transformers.Trainer(model=model, args=args, train_dataset=Tokens(400, 1),
                         callbacks=[callback, InjectNaN()]).train()

    lines = spooled(tmp_path / "spool" / "hf-nan.ndjson")
    events = unclassified([x for x in lines if x["type"] == "event"])
    assert [(e["step"], e["component"], e["detail"]["origin_known"]) for e in events] == [(14, "transformer.h.1", True)]
    # the next sample (step 20) saw NaN weights everywhere
    w20 = [x for x in lines if x["type"] == "point" and x["metric"] == "weight_norm" and x["step"] == 20]
    assert len(w20) >= 4 and all(x["value"] == "NaN" or math.isnan(float(x["value"])) for x in w20)


def test_a_lightning_fit_names_the_block_at_the_default_health_every(tmp_path):
    pl = need("lightning.pytorch")
    from warninglight.integrations.lightning import WarningLightCallback

    class LM(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lm = TinyLM()

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.lm(x).reshape(-1, VOCAB), y.reshape(-1))
            self.log("train_loss", loss, on_step=True, on_epoch=False)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-3)

    class InjectNaN(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == 13:  # the batch of optimizer step 14
                with torch.no_grad():
                    pl_module.lm.blocks[1].fc1.weight[3, 5] = float("nan")

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (8 * 25, 12), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x * 3 + 1) % VOCAB), batch_size=8)
    callback = WarningLightCallback(**client_options(tmp_path, "pl-nan"))
    trainer = pl.Trainer(max_steps=25, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, num_sanity_val_steps=0,
                         default_root_dir=str(tmp_path), callbacks=[callback, InjectNaN()])
    trainer.fit(LM(), loader)

    lines = spooled(tmp_path / "spool" / "pl-nan.ndjson")
    events = unclassified([x for x in lines if x["type"] == "event"])
    assert [(e["step"], e["component"], e["detail"]["origin_known"]) for e in events] == [(14, "lm.blocks.1", True)]
