"""Hugging Face `transformers.Trainer` integration.

    from warninglight.integrations.hf import WarningLightCallback

    trainer = Trainer(model=model, args=args, ...,
                      callbacks=[WarningLightCallback(run_id="bert-ft-3", url=URL, token=TOKEN)])
    # or, with a watch of your own (the callback never closes it):
    with warninglight.watch(run_id="bert-ft-3", url=URL, token=TOKEN, model=model) as wl:
        Trainer(..., callbacks=[WarningLightCallback(wl)]).train()

What it sends:

* `on_log` (every `logging_steps`, and after each evaluation): the numeric logs at
  `state.global_step`: `learning_rate` -> `lr`, `grad_norm`, `epoch`, `eval_loss` ->
  `val_loss`, any other `eval_<x>` -> `eval/<x>`, `test_<x>` -> `test/<x>`, the end-of-training
  summary `train_<x>` -> `train/<x>` (and `total_flos` -> `train/total_flos`); other names as
  they are (characters outside `[A-Za-z0-9._/-]` become `_`). Strings and lists are skipped.
  The Trainer's logged `loss` is sent only when the model's output carries no loss (below).
* `on_optimizer_step` (after `optimizer.step()`, before the gradients are zeroed; transformers
  >= 4.41): `loss`, the training loss of that optimizer step, taken by a forward hook from the
  `.loss` of the model's training forward passes (the mean over an accumulated step's
  micro-batches, their sum when the model normalised each by `num_items_in_batch`). The
  Trainer's logged loss is an average over `logging_steps` that its default
  `logging_nan_inf_filter=True` keeps finite when a step's loss is NaN; this one is the real
  value. A model whose output has no `.loss` (a `compute_loss` of your own): the logged loss is
  sent instead, with one warning while the filter is on. This log is also what runs the health
  hooks at their cadence while the gradients are still there. On older versions `on_step_end`
  does it, after `zero_grad()`: the health hooks then report no `grad_norm` (and say so once).
* `epoch`, which the Trainer logs again with each evaluation's and the final logs at the same
  step, is sent once per step: the client never sends a series' step twice.
* phases (unless `watch(phases=False)`): `warmup` at the start when the arguments configure
  warmup (`warmup_steps`, `warmup_ratio`), `steady` from the step after it; `restart` when
  training resumes from a checkpoint (then the regular phase 10 steps later); `eval` at the
  step an evaluation ran (`on_evaluate`) and `checkpoint` at the step a checkpoint was saved
  (`on_save`), each followed by the phase in effect before it from the next step on.

Multi-process training (`torchrun`, Accelerate): one sender per job. The callback passes the watch
`rank=0` on the world's main process (`state.is_world_process_zero`) and `args.process_index` elsewhere,
so the other ranks' watches do nothing; with `per_rank=True` every rank sends its own loss and health
as components `rank<N>` and `rank<N>/<component>`, and rank 0 alone the Trainer's logs and the phases.

Given keyword arguments instead of a watch, the callback opens `warninglight.watch(**kwargs)` in
`on_train_begin` with, unless given: `run_id` = `args.run_name` (else the output folder's
name), `model=` the trainer's model (per-component health; `model=None` to switch it off),
`optimizer=` the trainer's optimizer (unwrapped from accelerate), `budget={"steps": max_steps}`,
and a `config` of the main training arguments; and closes it in `on_train_end`.
"""
from __future__ import annotations

import logging
import math
import os

from . import metric_name, numeric, split_watch_args, unwrap_optimizer

log = logging.getLogger("warninglight")

try:
    from transformers import TrainerCallback as _Base
except ImportError as _exc:  # the mapping below stays importable for tests and docs
    _Base = None
    _IMPORT_ERROR = _exc

CONFIG_KEYS = ("learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
               "num_train_epochs", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps",
               "warmup_steps", "warmup_ratio", "lr_scheduler_type", "seed", "bf16", "fp16", "optim")
RESTART_SETTLE = 10  # steps in the `restart` phase after resuming


def map_logs(logs):
    """Trainer logs -> {metric: value} in the console's vocabulary (numeric values only)."""
    out = {}
    for key, value in (logs or {}).items():
        v = numeric(value)
        if v is None:
            continue
        key = str(key)
        if key == "learning_rate":
            name = "lr"
        elif key == "eval_loss":
            name = "val_loss"
        elif key.startswith("eval_"):
            name = "eval/" + key[5:]
        elif key.startswith("test_"):
            name = "test/" + key[5:]
        elif key.startswith("train_"):
            name = "train/" + key[6:]
        elif key == "total_flos":
            name = "train/total_flos"
        else:
            name = key
        out[metric_name(name)] = v
    return out


def warmup_steps(args, max_steps):
    """The number of warmup steps the arguments configure (0 if none)."""
    try:
        if hasattr(args, "get_warmup_steps") and max_steps and max_steps > 0:
            return int(args.get_warmup_steps(max_steps))
    except Exception:
        pass
    steps = int(getattr(args, "warmup_steps", 0) or 0)
    ratio = float(getattr(args, "warmup_ratio", 0.0) or 0.0)
    if steps > 0:
        return steps
    if ratio > 0 and max_steps and max_steps > 0:
        return int(math.ceil(max_steps * ratio))
    return 0


class _Logic:
    """The callback's behaviour, independent of the transformers base class."""

    def __init__(self, wl_or_kwargs=None, **kwargs):
        self.wl, self._options = split_watch_args(wl_or_kwargs, kwargs)
        self._owned = False
        self._phase = None  # the phase in effect outside eval/checkpoint
        self._warmup_end = 0
        self._optimizer_hooked = False
        self._last_driven = None
        self._loss_hook = None
        self._losses = []  # the training loss of each micro-batch since the last optimizer step (0-d tensors)
        self._losses_scaled = False  # normalised over the accumulated batch by the model (num_items_in_batch): summed
        self._loss_from_output = None  # None: not known before the first optimizer step
        self.stats = None  # the stats of the watch the callback opened, once it has closed it

    # ---- helpers -------------------------------------------------------------------------------------
    def _phases(self):
        return self.wl is not None and getattr(self.wl, "phases", True)

    def _set_phase(self, name, step):
        self._phase = name
        if self._phases():
            self.wl.phase(name, step=step)

    def _open(self, args, state, kwargs):
        import warninglight

        options = dict(self._options)
        if "run_id" not in options:
            run_name = getattr(args, "run_name", None)
            output_dir = getattr(args, "output_dir", None) or ""
            options["run_id"] = run_name or os.path.basename(os.path.normpath(output_dir)) or "hf-trainer"
        if "model" not in options and kwargs.get("model") is not None:
            options["model"] = kwargs["model"]
        if "optimizer" not in options and options.get("model") is not None and kwargs.get("optimizer") is not None:
            options["optimizer"] = unwrap_optimizer(kwargs["optimizer"])
        max_steps = getattr(state, "max_steps", 0) or 0
        if "budget" not in options and max_steps > 0:
            options["budget"] = {"steps": int(max_steps)}
        if "config" not in options:
            options["config"] = {k: getattr(args, k) for k in CONFIG_KEYS
                                 if isinstance(getattr(args, k, None), (int, float, str, bool))}
        if "rank" not in options:  # one sender per job unless per_rank: rank 0's watch sends, the others' do nothing
            process = int(getattr(args, "process_index", 0) or 0)
            options["rank"] = 0 if getattr(state, "is_world_process_zero", True) else max(1, process)
            options.setdefault("world_size", max(1, int(getattr(args, "world_size", 1) or 1)))
        self.wl = warninglight.watch(**options)
        self._owned = True

    def _quiet(self):
        return not getattr(self.wl, "sending", True)

    def _job_level(self):
        return getattr(self.wl, "rank", 0) == 0

    def _hook_loss(self, model):
        """Take each training forward pass's `.loss` from the model's output: the Trainer's logged `loss` is an
        average over `logging_steps` that `logging_nan_inf_filter` (on by default) keeps finite."""
        if self._loss_hook is None and model is not None and hasattr(model, "register_forward_hook"):
            try:
                self._loss_hook = model.register_forward_hook(self._capture_loss, with_kwargs=True)
            except Exception as exc:
                log.debug("warninglight: no forward hook for the loss: %r", exc)

    def _capture_loss(self, module, args, kwargs, output):
        if not module.training:
            return
        try:
            loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
            if loss is not None and getattr(loss, "ndim", None) == 0:
                self._losses.append(loss.detach())
                self._losses_scaled = "num_items_in_batch" in kwargs
        except Exception:
            pass

    def _unhook_loss(self):
        if self._loss_hook is not None:
            self._loss_hook.remove()
            self._loss_hook = None

    def _step_loss(self, args):
        """The loss of the optimizer step just taken (a 0-d tensor), or None; decides at the first step whether
        the model's output carries it."""
        losses, self._losses = self._losses, []
        if self._loss_from_output is None:
            self._loss_from_output = bool(losses)
            if not losses:
                self._unhook_loss()
                if getattr(args, "logging_nan_inf_filter", False):
                    log.warning("warninglight: the model's forward output carries no .loss, so the training loss sent is the "
                                "Trainer's logged one, which logging_nan_inf_filter=True (the default) replaces when it is NaN "
                                "or infinite: set logging_nan_inf_filter=False in TrainingArguments for a non-finite loss to "
                                "reach the console")
        if not losses:
            return None
        if len(losses) == 1:
            return losses[0]
        import torch

        total = torch.stack(losses)
        return total.sum() if self._losses_scaled else total.mean()

    def _drive(self, args, step):
        """Once per optimizer step: the step's loss, through the run-level log that also runs the health hooks."""
        if self.wl is not None and step != self._last_driven and not self._quiet():
            self._last_driven = step
            loss = self._step_loss(args)
            if loss is None:
                self.wl.log(step)
            else:
                self.wl.log(step, loss=loss)

    # ---- events --------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if self.wl is None:
            self._open(args, state, kwargs)
        if self._quiet():
            return
        self._hook_loss(kwargs.get("model"))
        start = state.global_step or 0
        self._warmup_end = warmup_steps(args, getattr(state, "max_steps", 0))
        regular = "warmup" if start < self._warmup_end else "steady"
        if start > 0:  # resumed from a checkpoint
            self._set_phase("restart", start + 1)
            settle = start + 1 + RESTART_SETTLE
            if regular == "warmup" and settle > self._warmup_end:
                regular = "steady"
            self._set_phase(regular, settle)
        else:
            self._set_phase(regular, 0)

    def on_optimizer_step(self, args, state, control, **kwargs):
        # Called after optimizer.step() and before zero_grad(); global_step is not incremented yet.
        self._optimizer_hooked = True
        self._drive(args, state.global_step + 1)

    def on_step_end(self, args, state, control, **kwargs):
        if not self._optimizer_hooked:
            self._drive(args, state.global_step)
        step = state.global_step
        if self._phase == "warmup" and step >= self._warmup_end:
            self._set_phase("steady", step + 1)

    def on_log(self, args, state, control, logs=None, **kwargs):
        # The Trainer's logs are the job's (gathered over the ranks): rank 0 sends them.
        if self.wl is None or self._quiet() or not self._job_level():
            return
        values = map_logs(logs)
        if self._loss_from_output:
            values.pop("loss", None)  # sent every optimizer step from the model's output, NaN included
        if values:
            self.wl.log(state.global_step, values)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        step = state.global_step
        if self._phases():
            self.wl.phase("eval", step=step)
            self.wl.phase(self._phase or "steady", step=step + 1)

    def on_save(self, args, state, control, **kwargs):
        step = state.global_step
        if self._phases():
            self.wl.phase("checkpoint", step=step)
            self.wl.phase(self._phase or "steady", step=step + 1)

    def on_train_end(self, args, state, control, **kwargs):
        self._unhook_loss()
        if self._owned and self.wl is not None:
            wl, self.wl = self.wl, None
            self._owned = False
            wl.close()
            self.stats = wl.stats


if _Base is not None:
    class WarningLightCallback(_Logic, _Base):
        """A `transformers.TrainerCallback` that sends the Trainer's logs, phases and health to Warning Light."""

        def __init__(self, wl_or_kwargs=None, **kwargs):
            _Logic.__init__(self, wl_or_kwargs, **kwargs)
else:
    class WarningLightCallback(_Logic):
        def __init__(self, *args, **kwargs):
            raise ImportError("warninglight.integrations.hf needs Hugging Face transformers: "
                              "pip install transformers (or pip install 'warninglight[transformers]')") from _IMPORT_ERROR
