"""Warning Light's client: one line around a training loop.

    import warninglight
    with warninglight.watch(run_id="llama-ft-7", url="http://127.0.0.1:8000", token="wl_...") as wl:
        for step in range(steps):
            ...
            wl.log(step, loss=loss, lr=lr)

Standard library only; PyTorch is needed only for `model=` (per-component health).
"""
import inspect as _inspect

from .watcher import Watch, git_code_rev, watch
from .wire import CONDITIONS, PHASES

__version__ = "0.1.0"
__all__ = ["watch", "Watch", "CONDITIONS", "PHASES", "git_code_rev", "__version__"]

try:  # help(warninglight.watch) shows every option (Watch.__new__ only picks the rank's kind of watch)
    _init = _inspect.signature(Watch.__init__)
    Watch.__signature__ = watch.__signature__ = _init.replace(parameters=list(_init.parameters.values())[1:])
except (TypeError, ValueError):  # pragma: no cover
    pass
