"""PyTorch Lightning integration (`lightning.pytorch`, or the older `pytorch_lightning` package).

    from warninglight.integrations.lightning import WarningLightCallback

    trainer = L.Trainer(..., callbacks=[WarningLightCallback(run_id="resnet-7", url=URL, token=TOKEN)])
    # or, with a watch of your own (the callback never closes it):
    with warninglight.watch(run_id="resnet-7", url=URL, token=TOKEN, model=module) as wl:
        L.Trainer(..., callbacks=[WarningLightCallback(wl)]).fit(module)

What it sends, at `trainer.global_step` (the number of optimizer steps taken):

* `on_train_batch_end`, once per optimizer step (the first batch end after `global_step` moved;
  with gradient accumulation the other micro-batches send nothing): `loss` from the training
  step's output and `lr` of the first optimizer's first parameter group; and at the steps the
  trainer's loggers log (`global_step` a multiple of `log_every_n_steps`, 50 by default) every
  other scalar in `trainer.callback_metrics` that is not a validation/test metric or an epoch
  aggregate (`val*`, `valid*`, `test*`, `*_epoch`), named as logged (`train_loss`, `train/acc`;
  characters outside `[A-Za-z0-9._/-]` become `_`). This run-level log is also what runs the health hooks:
  Lightning zeroes gradients just before the next backward, so they are still there.
* `on_validation_end` (not during the sanity check): the scalars of `callback_metrics` whose names
  start with `val` / `valid` (as logged, e.g. `val_loss`, `val_acc`, `val/f1`), once per step.
* phases (unless `watch(phases=False)`): `steady` at the start (`restart` when `global_step` > 0
  at the start: a resumed fit, then `steady` 10 steps later), `eval` from `on_validation_start`
  and `checkpoint` from `on_save_checkpoint` at the current step, each followed by the previous
  phase from the next step on.

Multi-process training (`strategy="ddp"`, `devices=N`, several nodes): one sender per job. The callback
passes the watch `rank=0` on `trainer.is_global_zero` and `trainer.global_rank` elsewhere, so the other
ranks' watches do nothing; with `per_rank=True` every rank sends its own loss, metrics and health as
components `rank<N>` and `rank<N>/<component>`, and rank 0 alone the job's series and the phases.

Given keyword arguments instead of a watch, the callback opens `warninglight.watch(**kwargs)` in
`on_train_start` with, unless given: `run_id` = the logger's `name-version` (else the module's
class name), `model=` the LightningModule (per-component health; `model=None` switches it off),
`optimizer=` the first optimizer, `budget={"steps": max_steps}` when `max_steps` is set; and
closes it in `on_train_end` (or `on_exception`).
"""
from __future__ import annotations

from . import metric_name, numeric, split_watch_args, unwrap_optimizer

try:
    from lightning.pytorch import Callback as _Base
except ImportError:
    try:
        from pytorch_lightning import Callback as _Base
    except ImportError as _exc:
        _Base = None
        _IMPORT_ERROR = _exc

RESTART_SETTLE = 10
_VALIDATION_PREFIXES = ("val", "valid")
_SKIPPED_PREFIXES = ("val", "valid", "test")


def _scalar_metrics(metrics):
    for key, value in (metrics or {}).items():
        v = numeric(value)
        if v is not None:
            yield str(key), v


def training_values(outputs, callback_metrics, lr=None):
    """What one optimizer step sends: {metric: value}."""
    values = {}
    loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
    loss = numeric(loss)
    if loss is not None:
        values["loss"] = loss
    if lr is not None:
        values["lr"] = lr
    for key, v in _scalar_metrics(callback_metrics):
        low = key.lower()
        if low.startswith(_SKIPPED_PREFIXES) or low.endswith("_epoch"):
            continue
        name = metric_name(key[:-5] if low.endswith("_step") else key)
        values.setdefault(name, v)
    return values


def validation_values(callback_metrics):
    return {metric_name(k): v for k, v in _scalar_metrics(callback_metrics)
            if k.lower().startswith(_VALIDATION_PREFIXES) and not k.lower().endswith("_step")}


def first_lr(trainer):
    try:
        optimizers = trainer.optimizers
        if optimizers:
            return float(unwrap_optimizer(optimizers[0]).param_groups[0]["lr"])
    except Exception:
        return None
    return None


class _Logic:
    def __init__(self, wl_or_kwargs=None, **kwargs):
        self.wl, self._options = split_watch_args(wl_or_kwargs, kwargs)
        self._owned = False
        self._phase = "steady"
        self._last_step = None
        self._last_val_step = None
        self.stats = None  # the stats of the watch the callback opened, once it has closed it

    def _phases(self):
        return self.wl is not None and getattr(self.wl, "phases", True)

    def _open(self, trainer, pl_module):
        import warninglight

        options = dict(self._options)
        if "run_id" not in options:
            logger = getattr(trainer, "logger", None)
            name = getattr(logger, "name", None) if logger is not None else None
            version = getattr(logger, "version", None) if logger is not None else None
            options["run_id"] = f"{name}-{version}" if name and version is not None else (name or type(pl_module).__name__)
        if "model" not in options:
            options["model"] = pl_module
        if "optimizer" not in options and options.get("model") is not None and getattr(trainer, "optimizers", None):
            options["optimizer"] = unwrap_optimizer(trainer.optimizers[0])
        max_steps = getattr(trainer, "max_steps", -1)
        if "budget" not in options and isinstance(max_steps, int) and max_steps > 0:
            options["budget"] = {"steps": max_steps}
        if "rank" not in options:  # one sender per job unless per_rank: rank 0's watch sends, the others' do nothing
            rank = int(getattr(trainer, "global_rank", 0) or 0)
            options["rank"] = 0 if getattr(trainer, "is_global_zero", True) else max(1, rank)
            options.setdefault("world_size", max(1, int(getattr(trainer, "world_size", 1) or 1)))
        self.wl = warninglight.watch(**options)
        self._owned = True

    def _close(self):
        if self._owned and self.wl is not None:
            wl, self.wl = self.wl, None
            self._owned = False
            wl.close()
            self.stats = wl.stats

    # ---- hooks -----------------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        if self.wl is None:
            self._open(trainer, pl_module)
        start = trainer.global_step or 0
        if not self._phases():
            return
        if start > 0:
            self.wl.phase("restart", step=start + 1)
            self.wl.phase("steady", step=start + 1 + RESTART_SETTLE)
        else:
            self.wl.phase("steady", step=0)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if self.wl is None or step == self._last_step or not getattr(self.wl, "sending", True):
            return
        self._last_step = step
        # `callback_metrics` is computed anew on every read (a pass over the logged results), so the other
        # scalars are read at the trainer's own logging cadence, as its loggers do; the loss comes every step.
        every = getattr(trainer, "log_every_n_steps", 1)
        metrics = getattr(trainer, "callback_metrics", None) if every and step % every == 0 else None
        self.wl.log(step, training_values(outputs, metrics, first_lr(trainer)))

    def on_validation_start(self, trainer, pl_module):
        if getattr(trainer, "sanity_checking", False) or not self._phases():
            return
        self.wl.phase("eval", step=trainer.global_step)

    def on_validation_end(self, trainer, pl_module):
        if getattr(trainer, "sanity_checking", False) or self.wl is None:
            return
        step = trainer.global_step
        if step != self._last_val_step:
            self._last_val_step = step
            values = validation_values(getattr(trainer, "callback_metrics", None))
            if values:
                self.wl.log(step, values)
        if self._phases():
            self.wl.phase(self._phase, step=step + 1)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        if not self._phases():
            return
        step = trainer.global_step
        self.wl.phase("checkpoint", step=step)
        self.wl.phase(self._phase, step=step + 1)

    def on_train_end(self, trainer, pl_module):
        self._close()

    def on_exception(self, trainer, pl_module, exception):
        self._close()


if _Base is not None:
    class WarningLightCallback(_Logic, _Base):
        """A Lightning `Callback` that sends the Trainer's metrics, phases and health to Warning Light."""

        def __init__(self, wl_or_kwargs=None, **kwargs):
            _Logic.__init__(self, wl_or_kwargs, **kwargs)
else:
    class WarningLightCallback(_Logic):
        def __init__(self, *args, **kwargs):
            raise ImportError("warninglight.integrations.lightning needs PyTorch Lightning: "
                              "pip install lightning (or pip install 'warninglight[lightning]')") from _IMPORT_ERROR
