"""Framework integrations: callbacks that drive a `warninglight.watch()` from a trainer.

    from warninglight.integrations.hf import WarningLightCallback          # transformers.Trainer
    from warninglight.integrations.lightning import WarningLightCallback   # lightning / pytorch_lightning

Each takes either a running `Watch` (the callback then never closes it) or the keyword
arguments of `warninglight.watch()` as a dict or as keywords (the callback opens the watch
when training begins, with the trainer's model and optimizer for the health hooks unless
`model=`/`optimizer=` are given, and closes it when training ends). The frameworks are
imported only by their own module, so this package imports with the standard library alone.
"""
from __future__ import annotations

import numbers
import re

__all__ = ["split_watch_args", "numeric", "metric_name"]

_BAD_METRIC_CHARS = re.compile(r"[^A-Za-z0-9._/-]")


def split_watch_args(wl_or_kwargs, kwargs):
    """(watch, options): `watch` is a Watch-like object given by the user, else None and `options`
    the keyword arguments for `warninglight.watch()`."""
    if wl_or_kwargs is not None and hasattr(wl_or_kwargs, "log") and hasattr(wl_or_kwargs, "phase"):
        if kwargs:
            raise TypeError("pass either a running watch or watch() keyword arguments, not both")
        return wl_or_kwargs, None
    options = dict(wl_or_kwargs or {})
    options.update(kwargs)
    return None, options


def numeric(value):
    """A plain float for a number or a 0-d tensor / numpy scalar; None for anything else (strings, lists, bools)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "detach") and hasattr(value, "numel"):  # torch tensor
        try:
            if value.numel() == 1 and (value.is_floating_point() or not value.is_complex()):
                return value.detach()  # converted in the sender thread
        except Exception:
            return None
        return None
    if hasattr(value, "item") and getattr(value, "shape", None) == ():  # numpy scalar
        try:
            return float(value.item())
        except Exception:
            return None
    return None



def metric_name(name):
    """A framework's metric name in the contract's alphabet ([A-Za-z0-9._/-], at most 128 characters)."""
    return _BAD_METRIC_CHARS.sub("_", str(name))[:128] or "_"


def unwrap_optimizer(optimizer):
    """The torch optimizer inside framework wrappers (accelerate's AcceleratedOptimizer, Lightning's
    LightningOptimizer), whose step() is the one that runs the step hooks."""
    seen = 0
    while optimizer is not None and seen < 5:
        inner = getattr(optimizer, "optimizer", None) or getattr(optimizer, "_optimizer", None)
        if inner is None or inner is optimizer:
            break
        optimizer, seen = inner, seen + 1
    return optimizer
