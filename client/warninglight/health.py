"""Read-only per-component health of a PyTorch model (`warninglight.watch(..., model=model)`).

The watcher builds `Health(wl, model, every=health_every, optimizer=optimizer)` and calls
`on_log(step)` after every run-level `wl.log(step, ...)`, and `close()` at the end. Every
`every` logged steps this module measures, per component, `weight_norm`, `act_norm`,
`act_max`, `dead_fraction`, `grad_norm` and `update_ratio`, sends them with
`wl._health_points`, and reports the contract's eight conditions with `wl.event` once per
onset. The README section "Component health (`model=`)" documents every rule; the short form:

Components (default; `components=[names]` overrides):
  * every child of an `nn.ModuleList` / `nn.Sequential` / `nn.ModuleDict` that has
    parameter-owning sub-modules of its own is one component (a transformer block, a ResNet
    block), holding all the parameters under it; the walk does not descend into it;
  * every other parameter belongs to the module that owns it directly (`nn.Linear`,
    `nn.Embedding`, `nn.LayerNorm`, ...); a parameter shared by two modules (tied embeddings)
    belongs to the first one in `named_modules()` order; parameters owned by the model object
    itself form the component `model`;
  * more than `max_components` (64): consecutive blocks of one container are grouped
    (`h.0-3`), and if that is still too many, the model's top-level children are used.

Cadence: the health step is the first logged step at or after each multiple of `every`. The
forward hooks, and the weight snapshot for `update_ratio`, are armed by the `on_log` just
before it (when the next log, expected at `step + the last gap between logs`, will reach a
multiple), and capture the first training-mode forward pass of the model after that. So with
one `wl.log` per optimizer step, health step `s` sees the forward pass, the gradients and the
update of step `s` itself; on the other steps no forward hook is registered.

Per step (`_StepCheck`, armed for the whole run once a model is given): the norm of every parameter
tensor before and after each optimizer step (one `torch._foreach_norm` each, written into a device
buffer, no host synchronisation), read at the next health step. It names the first component whose
weights went non-finite, with its step, at any `every`, and a component whose weights jumped (norm x4
or more) between the end of one optimizer step and the next, outside the optimizer (`exploding`).

Read-only: everything runs under `torch.no_grad()` on detached tensors; nothing is written to
a parameter, a gradient, the optimizer or its state, `requires_grad` or any RNG; hooks return
None. The only memory held between a forward pass and the health step is a few reductions
per component, from the arming (no optimizer) or the optimizer's step (optimizer given)
until the health step one copy of the weights, and two rows of per-tensor norms per step. An internal error switches health off for the
run with one warning; it never raises into training.
"""
from __future__ import annotations

import logging
import math
from collections import deque

import torch
from torch import nn

log = logging.getLogger("warninglight")

METRICS = ("weight_norm", "act_norm", "act_max", "dead_fraction", "grad_norm", "update_ratio")

# Condition triggers (the README's table says the same).
DEAD_EPS = 1e-6  # a unit whose |output| stays <= this for the whole forward pass is dead
DEAD_FRACTION = 0.99
STAGNANT_RATIO = 1e-7
EXPLODING_RATIO = 10.0
EXPLODING_REARM = 3.0
EXPLODING_HISTORY = 5  # health steps of EMA history before the ratio is judged
EMA_ALPHA = 0.1
OSC_WINDOW = 16  # grad_norm values (health steps)
OSC_FLIPS = 12  # of the OSC_WINDOW - 2 consecutive pairs of changes, at least this many change sign
OSC_AUTOCORR = -0.7  # lag-1 autocorrelation of log(grad_norm) over the window, at most
OSC_AMPLITUDE = 0.5  # median |change| / median level, at least
SATURATED_SHARE = 0.5  # share of a bounded activation's outputs within 1% of its range from a bound
SATURATION_MARGIN = 0.01
DTYPE_LIMIT = 0.5  # act_max >= this x the dtype's largest finite value
LOW_CONF_ENTROPY = 0.98  # mean entropy of the output distribution / log(classes)
LOW_CONF_ARM = 0.9  # ... judged only once it has been below this (an untrained model is near 1)
LOGIT_ROWS = 4096  # rows of the output used for the entropy
JUMP_RATIO = 4.0  # a component's weight norm grew this many times outside the optimizer: a weight jump
STEP_ROWS_MIN = 64  # rows of per-step weight norms kept on the device between reads (see _StepCheck)
STEP_ROWS_MAX = 4096
PERSIST = {"dead": 2, "stagnant": 2, "lost_gradient": 2, "saturated": 2, "low_confidence": 2,
           "exploding": 1, "oscillating": 1, "dtype_limit": 1}

_CONTAINERS = (nn.ModuleList, nn.Sequential, nn.ModuleDict)
_ACTIVATION_WORDS = ("relu", "gelu", "elu", "silu", "swish", "tanh", "sigmoid", "mish", "softplus", "softsign",
                     "activation")
_PASS_THROUGH = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.Identity)


def _bounds(module):
    """(low, high) of a bounded activation module, None for an unbounded one (high None: no upper bound)."""
    if isinstance(module, (nn.Tanh, nn.Softsign)):
        return (-1.0, 1.0)
    if isinstance(module, (nn.Sigmoid, nn.Hardsigmoid)):
        return (0.0, 1.0)
    if isinstance(module, nn.ReLU6):
        return (None, 6.0)
    if isinstance(module, nn.Hardtanh):
        return (float(module.min_val), float(module.max_val))
    return None


def _owns_params(module) -> bool:
    return next(module.parameters(recurse=False), None) is not None


def _composite(module) -> bool:
    return any(_owns_params(sub) for sub in module.modules() if sub is not module)


def _is_activation(module) -> bool:
    if _owns_params(module) or next(module.children(), None) is not None:
        return False
    if _bounds(module) is not None:
        return True
    name = type(module).__name__.lower()
    return "softmax" not in name and any(word in name for word in _ACTIVATION_WORDS)


def _is_conv(module) -> bool:
    return any(isinstance(m, nn.modules.conv._ConvNd) for m in module.modules())


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):  # includes transformers' ModelOutput
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        for item in out:
            if isinstance(item, torch.Tensor) and item.dim() >= 1:
                return item
    return None


def _logits_of(out):
    """The model output's logits, if it looks like logits: floating, >= 2 dims, >= 2 classes."""
    if isinstance(out, torch.Tensor):
        cand = out
    elif getattr(out, "logits", None) is not None and isinstance(out.logits, torch.Tensor):
        cand = out.logits
    elif isinstance(out, dict) and isinstance(out.get("logits"), torch.Tensor):
        cand = out["logits"]
    elif isinstance(out, (tuple, list)):
        cand = next((o for o in out if isinstance(o, torch.Tensor) and o.dim() >= 2), None)
    else:
        cand = None
    if cand is None or not cand.is_floating_point() or cand.dim() < 2 or cand.shape[-1] < 2:
        return None
    return cand


def _dense(t):
    return t.coalesce()._values() if t.is_sparse else t


def _tensor_norms(tensors):
    """Per-tensor L2 norms (float32), stacked on the first tensor's device."""
    tensors = [_dense(t.detach()) for t in tensors]
    device = tensors[0].device
    if all(t.device == device and t.layout == torch.strided for t in tensors):
        try:  # one kernel launch per list (what clip_grad_norm_ uses) instead of one call per tensor
            return torch.stack(torch._foreach_norm(tensors, 2, dtype=torch.float32))
        except Exception:
            pass
    norms = [torch.linalg.vector_norm(t, dtype=torch.float32) for t in tensors]
    device = norms[0].device
    return torch.stack([n if n.device == device else n.to(device) for n in norms])


def _norm(tensors):
    return torch.linalg.vector_norm(_tensor_norms(tensors)) if tensors else None


def _unwrap_optimizer(optimizer):
    """The torch optimizer inside a wrapper whose step() calls it (accelerate's AcceleratedOptimizer, Lightning's
    LightningOptimizer): its step() is the one that runs the step hooks."""
    for _ in range(5):
        inner = getattr(optimizer, "optimizer", None) or getattr(optimizer, "_optimizer", None)
        if not isinstance(inner, torch.optim.Optimizer) or inner is optimizer:
            break
        optimizer = inner
    return optimizer


def _unit_peaks(y, dim):
    """Each unit's largest |value| along `dim` over everything else (NaN propagates)."""
    if y.dim() <= 1:
        return y.abs()
    return y.abs().amax(dim=[d for d in range(y.dim()) if d != dim])


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)


class _Component:
    def __init__(self, name, modules, params):
        self.name = name
        self.modules = modules
        self.params = params
        self.trainable_at_start = any(p.requires_grad for p in params)
        self.conv = any(_is_conv(m) for m in modules)
        self.activations = []  # (module, bounds) whose outputs give dead_fraction / saturation
        self.snapshot = None
        self.reset_capture()
        # condition state
        self.streak = {}
        self.active = set()
        self.ema = None
        self.ema_n = 0
        self.history = deque(maxlen=OSC_WINDOW)
        self.conf_ready = False

    def reset_capture(self):
        self.w_norm = None  # norm of the weights the captured forward pass used
        self.act_sum = None
        self.act_n = 0
        self.act_max = None
        self.act_dtype = None
        self.peaks = {}  # id(module) -> each output unit's largest |value| (float tensor)
        self.sat = None  # [share sum tensor, count]

    def __repr__(self):
        return f"<component {self.name} ({len(self.params)} tensors)>"


def discover_components(model, names=None, max_components=64):
    """The components of `model`: a list of (name, [modules], [parameters]). See the module docstring."""
    claimed = set()

    def claim(params):
        out = []
        for p in params:
            if id(p) not in claimed:
                claimed.add(id(p))
                out.append(p)
        return out

    modules = dict(model.named_modules())
    found = []
    if names:
        for name in names:
            module = modules.get(name)
            if module is None:
                log.warning("warninglight: health: the model has no sub-module %r (components=); it is left out", name)
                continue
            params = claim(module.parameters())
            if params:
                found.append((name or "model", [module], params, None))
        return [(n, m, p) for n, m, p, _ in found]

    def visit(name, module, in_container, container):
        if in_container and _composite(module):
            params = claim(module.parameters())
            if params:
                found.append((name, [module], params, container))
            return
        params = claim(module.parameters(recurse=False))
        if params:
            found.append((name or "model", [module], params, None))
        for child_name, child in module.named_children():
            visit(f"{name}.{child_name}" if name else child_name, child, isinstance(module, _CONTAINERS), name)

    visit("", model, False, None)
    if len(found) > max_components:
        found = _coarsen(model, found, max_components, claim_reset=claimed)
    return [(n, m, p) for n, m, p, _ in found]


def _coarsen(model, found, limit, claim_reset):
    """Group consecutive blocks of each container; failing that, one component per top-level child."""
    blocks = [f for f in found if f[3] is not None]
    others = len(found) - len(blocks)
    if blocks and others < limit:
        size = math.ceil(len(blocks) / (limit - others))
        out, i = [], 0
        while i < len(found):
            name, mods, params, container = found[i]
            if container is None:
                out.append(found[i])
                i += 1
                continue
            group = [found[i]]
            while len(group) < size and i + len(group) < len(found) and found[i + len(group)][3] == container:
                group.append(found[i + len(group)])
            first, last = group[0][0].rsplit(".", 1)[-1], group[-1][0].rsplit(".", 1)[-1]
            label = name if len(group) == 1 else f"{container + '.' if container else ''}{first}-{last}"
            out.append((label, [m for g in group for m in g[1]], [p for g in group for p in g[2]], container))
            i += len(group)
        if len(out) <= limit:
            log.warning("warninglight: health: %d components is more than %d; consecutive blocks are grouped by %d "
                        "(pass components=[...] to choose)", len(found), limit, size)
            return out
    seen = set()
    out = []
    own = [p for p in model.parameters(recurse=False) if id(p) not in seen and not seen.add(id(p))]
    if own:
        out.append(("model", [model], own, None))
    for name, child in model.named_children():
        params = [p for p in child.parameters() if id(p) not in seen and not seen.add(id(p))]
        if params:
            out.append((name, [child], params, None))
    log.warning("warninglight: health: too many components (%d); using the model's %d top-level children "
                "(pass components=[...] to choose)", len(found), len(out[:limit]))
    return out[:limit]


def _attribute_activations(model, components):
    """Activation modules whose outputs give a component's dead_fraction and saturation: those inside
    it, else the next sibling after it (skipping dropout / identity), as in Sequential(Linear, ReLU)."""
    names = {id(m): n for n, m in model.named_modules()}
    by_name = dict(model.named_modules())
    owned = {id(m) for c in components for m in c.modules}
    taken = set()
    for c in components:
        for module in c.modules:
            inner = [m for m in module.modules() if m is not module and _is_activation(m) and id(m) not in taken]
            if not inner:
                name = names.get(id(module), "")
                parent = by_name.get(name.rsplit(".", 1)[0] if "." in name else "")
                if parent is not None and parent is not module:
                    siblings = list(parent.children())
                    idx = next((i for i, s in enumerate(siblings) if s is module), None)
                    if idx is not None:
                        for sib in siblings[idx + 1:]:
                            if isinstance(sib, _PASS_THROUGH):
                                continue
                            if _is_activation(sib) and id(sib) not in taken and id(sib) not in owned:
                                inner = [sib]
                            break
            for m in inner:
                taken.add(id(m))
                c.activations.append((m, _bounds(m)))


class _StepCheck:
    """Per-step weight norms of every component, on the device, read at the next health step.

    Armed with the health hooks (a model was given) and on every step, unlike the rest of this module:
    the norm of every parameter tensor (one `torch._foreach_norm`, no host synchronisation) is written
    into a row of a device buffer
      * before the first training-mode forward pass after each optimizer step (`pre`: the weights that
        forward pass uses), from a forward pre-hook on the model, and
      * right after each optimizer step (`post`), from an optimizer step post-hook; without an optimizer,
        at the run-level `wl.log` instead.
    At the next health step (the loop synchronises there anyway) the buffer is read in one transfer
    and folded per component on the host. That names, at any `health_every`,
      * the first component whose weights went non-finite, with the step it happened at (a NaN written
        into one block between two samples has spread to every component by the next sample), and
      * a component whose weights changed between the end of one optimizer step and the next forward
        pass - outside the optimizer - by a norm ratio of at least JUMP_RATIO (a weight jump).
    When more optimizer steps than the buffer holds pass between two reads it is read early (one
    synchronisation per STEP_ROWS_MIN steps at most)."""

    def __init__(self, health, components, every):
        self.health = health
        params = [p for c in components for p in c.params]
        first = params[0]
        if not all(p.device == first.device and p.layout == torch.strided and p.is_floating_point() for p in params):
            raise ValueError("parameters on several devices or not dense floating tensors")
        self.params = params
        self.segments = []  # (component, first tensor, end) in self.params
        i = 0
        for c in components:
            self.segments.append((c, i, i + len(c.params)))
            i += len(c.params)
        rows = min(STEP_ROWS_MAX, max(STEP_ROWS_MIN, 2 * every + 8))
        self.pre = torch.zeros(rows, len(params), dtype=torch.float32, device=first.device)
        self.post = torch.zeros_like(self.pre)
        self.staged = 0  # rows written on the device and not read yet
        self.rows = []  # [step or None, pre norms or None (staged), post norms or None, has post, staged index]
        self.want_pre = True
        self.last_post = None  # per-component norms after the last optimizer step already judged

    def _norms_into(self, buf, index):
        with torch.no_grad():
            torch.stack(torch._foreach_norm(self.params, 2, dtype=torch.float32), out=buf[index])

    def before_forward(self):
        """The model's first training-mode forward pass since the last optimizer step (or log)."""
        if not self.want_pre:
            return
        self.want_pre = False
        if self.staged == self.pre.shape[0]:
            self.read()
        self._norms_into(self.pre, self.staged)
        self.rows.append([None, None, None, False, self.staged])
        self.staged += 1
        if len(self.rows) > 2 * STEP_ROWS_MAX:  # a loop that never logs: keep the newest
            self.read()
            del self.rows[: len(self.rows) - STEP_ROWS_MAX]

    def after_update(self):
        """Right after an optimizer step (or, without an optimizer, at the run-level log)."""
        self.want_pre = True
        if self.rows and not self.rows[-1][3]:
            row = self.rows[-1]
            row[3] = True
            if row[4] is not None:
                self._norms_into(self.post, row[4])

    def on_log(self, step, prev):
        """Give the rows since the last log their optimizer step numbers (one log per optimizer step: `step`)."""
        self.want_pre = True  # an optimizer step that was skipped (GradScaler) still starts a new row
        new = [r for r in self.rows if r[0] is None]
        n = len(new)
        stride = max(1, round((step - prev) / n)) if prev is not None and n and step > prev else 1
        for k, row in enumerate(new):
            row[0] = step - (n - 1 - k) * stride

    def read(self):
        """Copy the staged rows to the host (one synchronisation)."""
        if not self.staged:
            return
        pre = self.pre[: self.staged].tolist()
        post = self.post[: self.staged].tolist()
        for row in self.rows:
            if row[4] is not None:
                row[1] = pre[row[4]]
                row[2] = post[row[4]] if row[3] else None
                row[4] = None
        self.staged = 0

    def _fold(self, norms):
        out = []
        for c, a, b in self.segments:
            out.append(math.sqrt(sum(x * x for x in norms[a:b])))
        return out

    def judge(self, order, health_step=None):
        """(step, component, condition, magnitude, detail) for every row with a step; those rows are dropped.
        A row of the health step itself is not judged for non-finite weights: the health step's own
        measurements (the weights its captured forward pass used, its activations) name that origin."""
        self.read()
        done = [r for r in self.rows if r[0] is not None]
        self.rows = [r for r in self.rows if r[0] is None]
        events = []
        rank = {id(c): i for i, c in enumerate(order)}
        comps = [c for c, _, _ in self.segments]
        jumped = set()
        h = self.health
        for step, pre, post, has_post, _ in done:
            if pre is None:
                continue
            now = self._fold(pre)
            bad = [c for c, x in zip(comps, now) if not math.isfinite(x)]
            if bad and not h._nonfinite_open and (health_step is None or step < health_step):
                h._nonfinite_open = True
                bad.sort(key=lambda c: rank.get(id(c), len(rank)))
                events.append((step, bad[0].name, "unclassified", float(len(bad)), {
                    "trigger": "non-finite weights before the forward pass of this step (per-step check; "
                               "first in forward order)",
                    "origin_known": len(bad) < len(comps), "nonfinite_components": [c.name[:64] for c in bad[:10]],
                    "seen_at_step": health_step}))
            if self.last_post is not None:
                for c, before, after in zip(comps, self.last_post, now):
                    if (id(c) not in jumped and math.isfinite(before) and math.isfinite(after) and before > 0
                            and after >= JUMP_RATIO * before):
                        jumped.add(id(c))
                        events.append((step, c.name, "exploding", after / before, {
                            "trigger": "weights jumped outside the optimizer: weight_norm grew between the end of "
                                       "the last optimizer step and this step's forward pass",
                            "weight_norm_before": before, "weight_norm_after": after,
                            "seen_at_step": health_step}))
            self.last_post = self._fold(post) if has_post and post is not None else None
        return events


class Health:
    """Per-component health hooks on `model`, reporting through `wl` (a warninglight Watch)."""

    def __init__(self, wl, model, every=10, optimizer=None, components=None, max_components=64, logits="auto"):
        self.wl = wl
        self.model = model
        self.every = max(1, int(every or 1))
        optimizer = _unwrap_optimizer(optimizer)
        self.optimizer = optimizer if hasattr(optimizer, "register_step_pre_hook") else None
        if optimizer is not None and self.optimizer is None:
            log.warning("warninglight: health: the optimizer has no register_step_pre_hook; update_ratio is measured "
                        "from the weights between health steps instead")
        self.logits = logits
        self.off = False
        self.components = []
        self._handles = []
        self._opt_handle = None
        self._capturing = False
        self._armed = False
        self._order = []
        self._last_order = []
        self._entropy = None
        self._opt_steps = 0
        self._snap_step = None
        self._prev_step = None
        self._last_block = None
        self._nonfinite_open = False
        self._warned = set()
        self.health_steps = 0
        self._check = None  # per-step weight norms (_StepCheck), armed for the whole run
        self._check_handles = []
        self._check_post_by_log = True
        try:
            found = discover_components(model, components, max_components)
            self.components = [_Component(n, m, p) for n, m, p in found]
            _attribute_activations(model, self.components)
            if not self.components:
                log.warning("warninglight: health: the model has no parameters; health is off")
                self.off = True
                return
            self._arm(None)
            self._arm_step_check()
        except Exception as exc:
            self._fail(exc)

    def _arm_step_check(self):
        try:
            check = _StepCheck(self, self.components, self.every)
        except Exception as exc:  # e.g. a model split over devices: the health steps still run
            log.warning("warninglight: health: no per-step weight check (%s); a NaN between health steps is named "
                        "at the next one, without its step", exc)
            return
        self._check = check
        if self.optimizer is not None and hasattr(self.optimizer, "register_step_post_hook"):
            # Around each optimizer step: before it the weights are those its forward pass used (a Lightning
            # training_step may never call the module's own forward, so a forward hook on it would not do).
            self._check_handles.append(self.optimizer.register_step_pre_hook(self._check_pre_opt_hook))
            self._check_handles.append(self.optimizer.register_step_post_hook(self._check_post_hook))
            self._check_post_by_log = False
        else:
            self._check_handles.append(self.model.register_forward_pre_hook(self._check_pre_hook))
            self._check_post_by_log = True

    def _check_pre_hook(self, module, args):
        check = self._check
        if check is None or not check.want_pre or not self.model.training:
            return
        try:
            check.before_forward()
        except Exception as exc:
            self._fail(exc)

    def _check_pre_opt_hook(self, optimizer, args, kwargs):
        check = self._check
        if check is None or not check.want_pre:
            return
        try:
            check.before_forward()
        except Exception as exc:
            self._fail(exc)

    def _check_post_hook(self, optimizer, args, kwargs):
        if self._check is None:
            return
        try:
            self._check.after_update()
        except Exception as exc:
            self._fail(exc)

    def _judge_steps(self, health_step=None):
        """The per-step check's events (non-finite weights, weight jumps) up to now, sent at their own steps."""
        if self._check is None:
            return
        for step, component, condition, magnitude, detail in self._check.judge(self._ordered(), health_step):
            self.wl.event(step, component, condition, magnitude, detail)

    @property
    def names(self):
        return [c.name for c in self.components]

    # ---- the watcher's calls ------------------------------------------------------------------------
    def on_log(self, step, metrics=None):
        """After a run-level `wl.log(step, **metrics)`. `metrics` (optional) lets lost_gradient see the loss."""
        if self.off:
            return
        try:
            step = int(step)
            prev = self._prev_step
            if prev is not None and step == prev:  # a second log of the same step (e.g. eval metrics): nothing to do
                return
            if prev is not None and step < prev:  # a restart re-sends steps: the cadence starts again
                self._last_block = None
                prev = None
            if self._check is not None:
                if self._check_post_by_log:
                    self._check.after_update()
                self._check.on_log(step, prev)
            block = step // self.every
            due = block != self._last_block and (step % self.every == 0 or (prev is not None and prev // self.every < block))
            if due:
                self._last_block = block
                self._measure(step, metrics)
            gap = step - prev if prev is not None else 1
            self._prev_step = step
            if (step + gap) // self.every > block:
                self._arm(step)
            else:
                self._disarm()
        except Exception as exc:
            self._fail(exc)

    def close(self):
        try:
            if not self.off:
                self._judge_steps()  # what the steps after the last health step showed
        except Exception as exc:
            self._fail(exc)
        self._disarm()
        self._remove_step_check()
        self.off = True

    def _remove_step_check(self):
        for h in self._check_handles:
            h.remove()
        self._check_handles = []
        self._check = None

    # ---- arming -------------------------------------------------------------------------------------
    def _arm(self, step):
        for c in self.components:
            c.reset_capture()
            c.snapshot = None
        self._order = []
        self._entropy = None
        self._opt_steps = 0
        if not self._handles:
            for c in self.components:
                for m in c.modules:
                    self._handles.append(m.register_forward_pre_hook(self._pre_hook(c)))
                    self._handles.append(m.register_forward_hook(self._post_hook(c)))
                for m, bounds in c.activations:
                    self._handles.append(m.register_forward_hook(self._act_hook(c, bounds)))
            self._handles.append(self.model.register_forward_hook(self._root_hook))
        if self.optimizer is not None:
            if self._opt_handle is None:
                self._opt_handle = self.optimizer.register_step_pre_hook(self._opt_hook)
        else:
            with torch.no_grad():
                for c in self.components:
                    c.snapshot = [p.detach().clone() for p in c.params]
            self._snap_step = step
        self._capturing = True
        self._armed = True

    def _disarm(self):
        self._capturing = False
        if not self._armed:
            return
        self._armed = False
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._opt_handle is not None:
            self._opt_handle.remove()
            self._opt_handle = None
        for c in self.components:
            c.reset_capture()
            c.snapshot = None
        self._entropy = None

    # ---- hooks (all return None: they change nothing) -----------------------------------------------------
    def _pre_hook(self, c):
        def hook(module, args):
            if not self._capturing or not self.model.training:
                return
            try:
                if c.w_norm is None:
                    if self.optimizer is None:  # with one, the optimizer's pre-step copy gives the same norm
                        with torch.no_grad():
                            c.w_norm = _norm(c.params)
                    else:
                        c.w_norm = False
                    self._order.append(c)
            except Exception as exc:
                self._fail(exc)
        return hook

    def _post_hook(self, c):
        def hook(module, args, output):
            if not self._capturing or not self.model.training:
                return
            try:
                y = _first_tensor(output)
                if y is None or not y.is_floating_point():
                    return
                with torch.no_grad():
                    y = y.detach()
                    dim = 1 if c.conv and y.dim() > 2 else y.dim() - 1
                    norm = torch.linalg.vector_norm(y, dim=dim, dtype=torch.float32).mean()
                    c.act_sum = norm if c.act_sum is None else c.act_sum + norm
                    c.act_n += 1
                    per_unit = _unit_peaks(y, dim)
                    top = per_unit.max().float()
                    c.act_max = top if c.act_max is None else torch.maximum(c.act_max, top)
                    c.act_dtype = y.dtype
                    if not c.activations:
                        self._keep_peak(c, module, per_unit)
            except Exception as exc:
                self._fail(exc)
        return hook

    def _act_hook(self, c, bounds):
        def hook(module, args, output):
            if not self._capturing or not self.model.training:
                return
            try:
                if not isinstance(output, torch.Tensor) or not output.is_floating_point() or output.dim() < 1:
                    return
                with torch.no_grad():
                    y = output.detach()
                    dim = 1 if c.conv and y.dim() > 2 else y.dim() - 1
                    self._keep_peak(c, module, _unit_peaks(y, dim))
                    if bounds is not None:
                        low, high = bounds
                        span = (high - low) if low is not None else high
                        margin = SATURATION_MARGIN * span
                        at = y >= high - margin
                        if low is not None:
                            at = at | (y <= low + margin)
                        share = at.float().mean()
                        c.sat = [share, 1] if c.sat is None else [c.sat[0] + share, c.sat[1] + 1]
            except Exception as exc:
                self._fail(exc)
        return hook

    @staticmethod
    def _keep_peak(c, module, per_unit):
        """Each unit's largest |output| over the captured calls (NaN stays NaN: not dead, non-finite)."""
        per_unit = per_unit.float()
        prev = c.peaks.get(id(module))
        c.peaks[id(module)] = per_unit if prev is None or prev.shape != per_unit.shape else torch.maximum(prev, per_unit)

    def _root_hook(self, module, args, output):
        if not self._capturing or not self.model.training:
            return
        try:
            self._capturing = False  # one forward pass per health step
            self._last_order = list(self._order)
            if self.logits is False:
                return
            logits = _logits_of(output)
            if logits is None:
                return
            with torch.no_grad():
                x = logits.detach().reshape(-1, logits.shape[-1])
                if x.shape[0] > LOGIT_ROWS:
                    x = x[:: math.ceil(x.shape[0] / LOGIT_ROWS)]
                lp = torch.log_softmax(x.float(), dim=-1)
                self._entropy = -(lp.exp() * lp).sum(-1).mean() / math.log(x.shape[-1])
        except Exception as exc:
            self._fail(exc)

    def _opt_hook(self, optimizer, args, kwargs):
        try:
            self._opt_steps += 1
            if self._opt_steps == 1:
                with torch.no_grad():
                    for c in self.components:
                        c.snapshot = [p.detach().clone() for p in c.params]
        except Exception as exc:
            self._fail(exc)

    # ---- the health step ------------------------------------------------------------------------------
    def _ordered(self):
        """Components in the order the last captured forward pass reached them, then the others."""
        first = self._order or self._last_order
        seen = {id(c) for c in first}
        return list(first) + [c for c in self.components if id(c) not in seen]

    def _measure(self, step, metrics):
        self._judge_steps(step)
        comps = self._ordered()
        vals, slots = [], []

        def put(c, key, t):
            if t is not None:
                slots.append((c, key))
                vals.append(t.reshape(()).float())

        with torch.no_grad():
            if self.optimizer is not None:
                steps_since = self._opt_steps
            else:
                steps_since = step - self._snap_step if self._snap_step is not None and step > self._snap_step else 0
            for c in comps:
                snap_norm = _norm(c.snapshot) if c.snapshot is not None and steps_since > 0 else None
                w = c.w_norm if c.w_norm is not None and c.w_norm is not False else (
                    snap_norm if snap_norm is not None else _norm(c.params))
                put(c, "weight_norm", w)
                if c.act_n:
                    put(c, "act_norm", c.act_sum / c.act_n)
                    put(c, "act_max", c.act_max)
                if c.peaks:
                    parts = list(c.peaks.values())
                    peaks = torch.cat([a.reshape(-1).to(parts[0].device) for a in parts])
                    dead = (peaks <= DEAD_EPS).float().mean()
                    put(c, "dead_fraction", torch.where(torch.isnan(peaks).any(), torch.full_like(dead, math.nan), dead))
                if c.sat is not None:
                    put(c, "saturation", c.sat[0] / c.sat[1])
                trainable = [p for p in c.params if p.requires_grad]
                grads = [p.grad for p in trainable if p.grad is not None]
                c.n_trainable = len(trainable)
                c.n_missing = len(trainable) - len(grads)
                if grads:
                    norms = _tensor_norms(grads)
                    put(c, "grad_norm", torch.linalg.vector_norm(norms))
                    put(c, "grad_bad", (~(torch.isfinite(norms) & (norms > 0))).sum())
                if snap_norm is not None:
                    current = [p.detach() for p in c.params]
                    try:
                        deltas = torch._foreach_sub(current, c.snapshot)
                    except Exception:
                        deltas = [p - s for p, s in zip(current, c.snapshot)]
                    diff = _tensor_norms(deltas)
                    del deltas
                    diff = torch.linalg.vector_norm(diff)
                    ratio = torch.where(snap_norm == 0, torch.sign(diff), diff / snap_norm) / steps_since
                    put(c, "update_ratio", ratio)
            if self._entropy is not None:
                put(None, "entropy", self._entropy)
            if vals:
                device = vals[0].device
                numbers = torch.stack([v if v.device == device else v.to(device) for v in vals]).tolist()
            else:
                numbers = []
        got = {}
        for (c, key), value in zip(slots, numbers):
            got[(id(c) if c is not None else None, key)] = value
        self.health_steps += 1

        points = []
        for c in comps:
            for metric in METRICS:
                value = got.get((id(c), metric))
                if value is not None:
                    points.append((metric, c.name, value))
        grads_seen = any((id(c), "grad_norm") in got for c in comps)
        all_zero = grads_seen and all(got.get((id(c), "grad_norm"), 0.0) == 0.0 for c in comps)
        if not grads_seen or all_zero:
            points = [p for p in points if p[0] != "grad_norm"]
            self._warn_once("grads", "warninglight: health: no gradients were present when wl.log() was called "
                            "(call it after backward()/step() and before zero_grad()); grad_norm is not reported")
        if points:
            self.wl._health_points(step, points)
        for component, condition, magnitude, detail in self._conditions(step, comps, got, metrics, grads_seen and not all_zero):
            self.wl.event(step, component, condition, magnitude, detail)

    # ---- conditions -------------------------------------------------------------------------------------
    def _judge(self, c, key, held, persist, events, condition, magnitude, detail, rearm=True):
        """Once per onset: an event when `held` for `persist` health steps in a row; re-armed when
        not held (and `rearm`)."""
        if held:
            n = c.streak.get(key, 0) + 1
            c.streak[key] = n
            if n >= persist and key not in c.active:
                c.active.add(key)
                events.append((c.name, condition, float(magnitude), detail))
        else:
            c.streak[key] = 0
            if rearm:
                c.active.discard(key)

    def _conditions(self, step, comps, got, metrics, grads_visible):
        events = []

        def v(c, key):
            return got.get((id(c), key))

        # unclassified: a non-finite weight, activation norm or activation max; one event per episode
        # (while any component stays non-finite), naming the origin.
        nonfinite = [c for c in comps if any(x is not None and not math.isfinite(x)
                                             for x in (v(c, "weight_norm"), v(c, "act_norm"), v(c, "act_max")))]
        if nonfinite and not self._nonfinite_open:
            self._nonfinite_open = True
            by_weights = [c for c in nonfinite if not _finite(v(c, "weight_norm"))]
            origin, where = (by_weights[0], "weights") if by_weights else (nonfinite[0], "activations")
            known = len(by_weights) < len(comps)  # not every component's weights went at once
            events.append((origin.name, "unclassified", float(len(nonfinite)),
                           {"trigger": f"non-finite {where} (first in forward order)", "origin_known": known,
                            "nonfinite_components": [c.name[:64] for c in nonfinite[:10]]}))
        elif not nonfinite:
            self._nonfinite_open = False

        loss = None
        if metrics:
            raw = metrics.get("loss")
            try:
                loss = float(raw.detach() if hasattr(raw, "detach") else raw) if raw is not None else None
            except Exception:
                loss = None
        forward_clean = math.isfinite(loss) if loss is not None else not nonfinite

        order = self._order or self._last_order
        last = order[-1] if order else None

        for c in comps:
            g = v(c, "grad_norm")
            trainable = c.trainable_at_start and c.n_trainable > 0  # judged for gradients
            # lost_gradient
            if grads_visible and trainable:
                no_grad = c.n_missing == c.n_trainable
                bad = no_grad or g == 0.0 or (g is not None and not math.isfinite(g) and forward_clean)
                share = (c.n_missing + (v(c, "grad_bad") or 0.0)) / max(1, c.n_trainable)
                self._judge(c, "lost_gradient", bad, PERSIST["lost_gradient"], events, "lost_gradient", share,
                            {"grad_norm": g if _finite(g) else str(g), "trigger": "grad_norm 0, missing or non-finite while the loss is finite"})
            # exploding and oscillating: judged on finite gradient norms only
            if _finite(g) and trainable:
                ratio = g / c.ema if c.ema and c.ema_n >= EXPLODING_HISTORY else None
                held = ratio is not None and ratio > EXPLODING_RATIO
                self._judge(c, "exploding", held, PERSIST["exploding"], events, "exploding", ratio or 0.0,
                            {"grad_norm": g, "ema": c.ema}, rearm=ratio is None or ratio < EXPLODING_REARM)
                if not held:
                    c.ema = g if c.ema is None else (1 - EMA_ALPHA) * c.ema + EMA_ALPHA * g
                    c.ema_n += 1
                c.history.append(g)
                osc = self._oscillation(c.history)
                self._judge(c, "oscillating", osc is not None, PERSIST["oscillating"], events, "oscillating", osc or 0.0,
                            {"grad_norm_window": list(c.history)})
            # stagnant
            u = v(c, "update_ratio")
            if _finite(u) and c.trainable_at_start:
                self._judge(c, "stagnant", u < STAGNANT_RATIO, PERSIST["stagnant"], events, "stagnant", u,
                            {"update_ratio": u})
            # dead
            d = v(c, "dead_fraction")
            if _finite(d):
                self._judge(c, "dead", d >= DEAD_FRACTION, PERSIST["dead"], events, "dead", d, {"dead_fraction": d})
            # saturated: a bounded activation at its bounds, or activations at the dtype's limit
            s = v(c, "saturation")
            if _finite(s):
                self._judge(c, "saturated", s >= SATURATED_SHARE, PERSIST["saturated"], events, "saturated", s,
                            {"trigger": "share of bounded-activation outputs at a bound", "share": s})
            m = v(c, "act_max")
            if _finite(m) and c.act_dtype is not None and c.act_dtype.is_floating_point:
                limit = torch.finfo(c.act_dtype).max
                self._judge(c, "dtype_limit", m >= DTYPE_LIMIT * limit, PERSIST["dtype_limit"], events, "saturated",
                            m / limit, {"trigger": "act_max near the dtype's largest value", "act_max": m,
                                        "dtype": str(c.act_dtype)})
        # low_confidence: the model's output distribution near uniform, after it had been confident
        e = got.get((None, "entropy"))
        if _finite(e) and last is not None:
            if e < LOW_CONF_ARM:
                last.conf_ready = True
            self._judge(last, "low_confidence", last.conf_ready and e >= LOW_CONF_ENTROPY, PERSIST["low_confidence"],
                        events, "low_confidence", e, {"normalized_entropy": e})
        # the origin first, then in forward order (events are already in that order)
        return events

    @staticmethod
    def _oscillation(history):
        """Relative amplitude when grad_norm zig-zags: over the window the sign of its change flips on at least
        OSC_FLIPS of the pairs of consecutive changes, the lag-1 autocorrelation of log(grad_norm) is at most
        OSC_AUTOCORR, and the median |change| is at least OSC_AMPLITUDE x the median level; else None.
        (On simulated i.i.d. log-normal noise of any spread it holds on about 5 windows in 10,000; on a x3
        zig-zag with 30% noise on 7 in 10, x6 on all.)"""
        if len(history) < OSC_WINDOW:
            return None
        xs = list(history)
        d = [b - a for a, b in zip(xs, xs[1:])]
        flips = sum(1 for a, b in zip(d, d[1:]) if a * b < 0)
        if flips < OSC_FLIPS:
            return None
        level = sorted(xs)[len(xs) // 2]
        if level <= 0 or min(xs) <= 0:
            return None
        amplitude = sorted(abs(x) for x in d)[len(d) // 2] / level
        if amplitude < OSC_AMPLITUDE:
            return None
        logs = [math.log(x) for x in xs]
        mean = sum(logs) / len(logs)
        centred = [x - mean for x in logs]
        var = sum(x * x for x in centred)
        if var <= 0:
            return None
        autocorr = sum(a * b for a, b in zip(centred, centred[1:])) / var
        return amplitude if autocorr <= OSC_AUTOCORR else None

    # ---- failure --------------------------------------------------------------------------------------
    def _warn_once(self, key, message):
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    def _fail(self, exc):
        if self.off:
            return
        self.off = True
        log.warning("warninglight: health hooks switched off after an internal error (%r); training is unaffected", exc)
        try:
            self._disarm()
        except Exception:
            pass
        try:
            self._remove_step_check()
        except Exception:
            pass
