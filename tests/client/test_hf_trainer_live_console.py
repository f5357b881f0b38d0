"""The real Hugging Face `Trainer` (a tiny GPT-2 built from a config, no download) with the client's callback,
against a live console with the starter pack, read back through the console's API.

* A clean run with evaluations, a checkpoint and the Trainer's final logs is one attempt with no rewind and
  no alert (the Trainer logs `epoch` again at the same step with its eval and final logs: the repeats stay in
  the client).
* A NaN written into one block's weights mid-run raises `nonfinite-loss` on the training loss within 5
  steps, under the Trainer's default `logging_nan_inf_filter=True` (which logs the NaN loss as a finite
  number): the callback sends the loss from the model's forward output.
* A model whose output carries no loss: the callback sends the Trainer's logged loss and warns once that a
  NaN would not reach the console while the filter is on.
"""
import logging
import math

import pytest
from alerts.starter import install_starter_pack

from tests.client.support import alerts_of, need, read_json, read_points, tiny_lm_data

transformers = need("transformers")
torch = need("torch")
need("accelerate")  # the Trainer's own requirement

from warninglight.integrations.hf import WarningLightCallback  # noqa: E402

STEPS = 60
INJECT = 30  # the NaN is written before the forward pass of step INJECT + 1


def tiny_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=32, vocab_size=64,
                                     bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.rows = tiny_lm_data(n, seed)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


class InjectNaN(transformers.TrainerCallback):
    """Writes a NaN into block 1's MLP weights before the forward pass of step `after + 1`."""

    def __init__(self, after):
        self.after = after

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.after:
            with torch.no_grad():
                model.transformer.h[1].mlp.c_fc.weight[3, 5] = math.nan


def train(tmp_path, console_server, token, run_id, model=None, extra_callbacks=(), **args):
    torch.set_num_threads(1)
    options = dict(output_dir=str(tmp_path / run_id), max_steps=STEPS, per_device_train_batch_size=8, learning_rate=3e-3,
                   warmup_steps=6, logging_steps=5, eval_strategy="steps", eval_steps=20, save_strategy="steps",
                   save_steps=30, report_to=[], use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0)
    options.update(args)
    callback = WarningLightCallback(run_id=run_id, url=console_server.url, token=token, spool_dir=tmp_path / "spool",
                                    flush_seconds=0.05, code_rev=False)
    trainer = transformers.Trainer(model=model or tiny_gpt2(), args=transformers.TrainingArguments(**options),
                                   train_dataset=Tokens(480, 1), eval_dataset=Tokens(16, 2),
                                   callbacks=[callback, *extra_callbacks])
    assert trainer.args.logging_nan_inf_filter  # the Trainer's default
    trainer.train()
    return callback


def test_a_clean_trainer_run_is_one_attempt_without_alerts(console_server, project, token, tmp_path):
    install_starter_pack(project)
    callback = train(tmp_path, console_server, token, "hf-clean")
    run = read_json(token, "/api/v1/runs/hf-clean/")
    assert run["attempt"] == 1 and [a["rewind"] for a in run["attempts"]] in ([], [None])
    assert alerts_of(token, "hf-clean") == []
    loss = read_points(token, "hf-clean", "loss")
    assert [p["step"] for p in loss] == list(range(1, STEPS + 1))  # the loss of every optimizer step
    assert [p["step"] for p in read_points(token, "hf-clean", "val_loss")] == [20, 40, 60]
    assert {p["step"] for p in read_points(token, "hf-clean", "epoch")} >= {5, 20, 60}
    assert callback.stats["repeated_steps"] > 0  # the Trainer did log epoch again at a step: not sent twice


def test_a_nan_in_one_block_raises_nonfinite_loss_on_the_training_loss_within_five_steps(
        console_server, project, token, tmp_path):
    install_starter_pack(project)
    train(tmp_path, console_server, token, "hf-nan", extra_callbacks=[InjectNaN(INJECT)])
    loss = {p["step"]: p["value"] for p in read_points(token, "hf-nan", "loss")}
    assert all(isinstance(loss[s], float) for s in range(1, INJECT + 1)) and loss[INJECT + 1] == "NaN"
    alerts = [a for a in alerts_of(token, "hf-nan") if a["rule"]["name"] == "nonfinite-loss"]
    assert alerts and alerts[0]["metric"] == "loss" and INJECT < alerts[0]["step"] <= INJECT + 5
    assert read_json(token, "/api/v1/runs/hf-nan/")["attempt"] == 1


class NoLossInOutput(torch.nn.Module):
    """A model whose output has no loss; a Trainer subclass computes it (as custom losses do)."""

    def __init__(self):
        super().__init__()
        self.lm = tiny_gpt2()

    def forward(self, input_ids, labels=None):
        return {"logits": self.lm(input_ids=input_ids).logits}


class OwnLossTrainer(transformers.Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        logits = model(**inputs)["logits"]
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


def test_without_a_loss_in_the_output_the_logged_loss_is_sent_with_one_warning(console_server, token, tmp_path, caplog,
                                                                                 monkeypatch):
    caplog.set_level(logging.WARNING, logger="warninglight")
    monkeypatch.setattr(transformers, "Trainer", OwnLossTrainer)
    train(tmp_path, console_server, token, "hf-own-loss", model=NoLossInOutput(), max_steps=20, eval_strategy="no",
          save_strategy="no")
    assert [p["step"] for p in read_points(token, "hf-own-loss", "loss")] == [5, 10, 15, 20]  # the Trainer's logs
    warnings = [r.getMessage() for r in caplog.records if "logging_nan_inf_filter" in r.getMessage()]
    assert len(warnings) == 1 and "logging_nan_inf_filter=False" in warnings[0]


@pytest.fixture(autouse=True)
def _quiet_transformers():
    transformers.logging.set_verbosity_error()
