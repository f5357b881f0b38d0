"""Hugging Face `transformers.Trainer` integration.

    from warninglight.integrations.hf import WarningLightCallback

    trainer = Trainer(model=model, args=args, ...,
                      callbacks=[WarningLightCallback(run_id="bert-ft-3", url=URL, token=TOKEN)])
    # or, with a watch of your own (the callback never closes it):
    with warninglight.watch(run_id="bert-ft-3", url=URL, token=TOKEN, model=model) as wl:
        Trainer(..., callbacks=[WarningLightCallback(wl)]).train()

What it sends:

* `on_log` (every `logging_steps`, and after each evaluation): the numeric logs at
  `state.global_step`: `loss`, `learning_rate` -> `lr`, `grad_norm`, `epoch`, `eval_loss` ->
  `val_loss`, any other `eval_<x>` -> `eval/<x>`, `test_<x>` -> `test/<x>`, the end-of-training
  summary `train_<x>` -> `train/<x>` (and `total_flos` -> `train/total_flos`); other names as
  they are (characters outside `[A-Za-z0-9._/-]` become `_`). Strings and lists are skipped.
* `on_optimizer_step` (after `optimizer.step()`, before the gradients are zeroed; transformers
  >= 4.41): `wl.log(step)` with no values, which is what runs the health hooks at their cadence
  while the gradients are still there. On older versions `on_step_end` does it, after
  `zero_grad()`: the health hooks then report no `grad_norm` (and say so once).
* phases (unless `watch(phases=False)`): `warmup` at the start when the arguments configure
  warmup (`warmup_steps`, `warmup_ratio`), `steady` from the step after it; `restart` when
  training resumes from a checkpoint (then the regular phase 10 steps later); `eval` at the
  step an evaluation ran (`on_evaluate`) and `checkpoint` at the step a checkpoint was saved
  (`on_save`), each followed by the phase in effect before it from the next step on.

Given keyword arguments instead of a watch, the callback opens `warninglight.watch(**kwargs)` in
`on_train_begin` with, unless given: `run_id` = `args.run_name` (else the output folder's
name), `model=` the trainer's model (per-component health; `model=None` to switch it off),
`optimizer=` the trainer's optimizer (unwrapped from accelerate), `budget={"steps": max_steps}`,
and a `config` of the main training arguments; and closes it in `on_train_end`.
"""
from __future__ import annotations

import math
import os

from . import metric_name, numeric, split_watch_args, unwrap_optimizer

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
        self.wl = warninglight.watch(**options)
        self._owned = True

    def _drive(self, state):
        """Run the health hooks (through a run-level log with no values) once per optimizer step."""
        step = state.global_step
        if self.wl is not None and step != self._last_driven:
            self._last_driven = step
            self.wl.log(step)

    # ---- events --------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if self.wl is None:
            self._open(args, state, kwargs)
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
        if self.wl is not None:
            step = state.global_step + 1
            if step != self._last_driven:
                self._last_driven = step
                self.wl.log(step)

    def on_step_end(self, args, state, control, **kwargs):
        if not self._optimizer_hooked:
            self._drive(state)
        step = state.global_step
        if self._phase == "warmup" and step >= self._warmup_end:
            self._set_phase("steady", step + 1)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.wl is None:
            return
        values = map_logs(logs)
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
        if self._owned and self.wl is not None:
            wl, self.wl = self.wl, None
            self._owned = False
            wl.close()


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
