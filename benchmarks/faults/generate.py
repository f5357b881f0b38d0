#!/usr/bin/env python
"""Generate the labelled fault corpus: small real training runs on CPU with injected faults.

    .venv/bin/pip install -e '.[faults]'                  # torch==2.13.0 (CPU)
    .venv/bin/python benchmarks/faults/generate.py        # all 74 runs -> benchmarks/faults/corpus/
    .venv/bin/python benchmarks/faults/generate.py --set extended   # the 34 runs of issue 11 (MLP, CNN, transformer)
    .venv/bin/python benchmarks/faults/generate.py --set issue20    # the 62 runs of issue 20 (adds a char GRU and a step_time point)
    .venv/bin/python benchmarks/faults/generate.py --merge /tmp/a /tmp/b   # runs made with --out elsewhere
    .venv/bin/python benchmarks/faults/generate.py --only lr_spike --seeds 0 1 --out /tmp/c
    .venv/bin/python benchmarks/faults/generate.py --only benign --seeds 4

Every run trains the same tiny pre-LN character-level transformer (2 blocks, d=64) with AdamW
on the text of the Python standard library's own .py files (found with
`os.path.dirname(os.__file__)`, sorted; nothing is downloaded), on one CPU thread, for 700
optimizer steps, and writes what a training job would send under contract v1
(shared/spec/ingest-v1.md, NDJSON): one run line, phase lines, and per step the run-level
points `loss`, `lr`, `throughput`, `grad_norm` and, for each of the six components `embed`,
`blocks.0.attn`, `blocks.0.mlp`, `blocks.1.attn`, `blocks.1.mlp`, `head`, the points
`grad_norm`, `weight_norm`, `update_ratio`, `act_norm`, `dead_fraction`; `val_loss` at evals.

The extended set (EXT_RUNS) adds an MLP and a causal CNN beside the transformer, six fault kinds
(stall on a noisy fast model, weight jump, one NaN weight, label onset, a NaN loss that recovers,
validation divergence with evals every 100 steps) and noisy benign runs with short throughput
dips; its step times are measured plus simulated shared-machine delays, rescaled to an idle
core's step (see NOMINAL_STEP_S and IDLE_STEP_S).

The issue-20 set (I20_KINDS) adds ten fault kinds (a loss shift after a failed restore, a throughput
drop, an Adam second-moment corruption, a gradient-accumulation ramp, a compounding step-time drift,
a gradient collapse, a component's telemetry stopping, an LR collapse, a repeating data loader,
persistent loss-scaler skipping) and five benign kinds (noisy evals, isolated AMP overflows, an
announced batch change, step-decay/SGDR schedules, a slow checkpoint on a loaded machine), a char GRU
family and a run-level `step_time` point.

Original fault runs (8 kinds) inject one fault at a step drawn from the seed in 250..550; benign runs
exercise warmup, evals, checkpoints, cosine LR decay, a data refresh and a restart from a
checkpoint with replayed steps. labels.json says what was injected where. Training values are a
deterministic function of (kind, seed) on a given torch build and Python standard library;
`time` and `throughput` are measured wall time and differ from one generation to the next.
A fault run of seed N and the benign run of seed N share the model initialisation and the
batch order, so their values agree step for step before the fault (and before the benign
run's data refresh).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "corpus"

# ----------------------------------------------------------------------------- configuration
STEPS = 700
WARMUP = 50
BATCH = 16
SEQ = 64
D_MODEL = 64
HEADS = 4
HIDDEN = 256
LAYERS = 2
PEAK_LR = 3e-3
MIN_LR = 3e-4
WEIGHT_DECAY = 0.1
BETAS = (0.9, 0.99)
EVAL_EVERY = 100
EVAL_BATCHES = 8
CHECKPOINTS = (250, 450)
T0 = 1764400000

COMPONENTS = ["embed", "blocks.0.attn", "blocks.0.mlp", "blocks.1.attn", "blocks.1.mlp", "head"]
COMPONENT_METRICS = ("grad_norm", "weight_norm", "update_ratio", "act_norm", "dead_fraction")

FAULT_KINDS = [
    "lr_spike",
    "nan_weights",
    "component_blowup",
    "dead_layer",
    "frozen_layer",
    "label_corruption",
    "overfit_divergence",
    "dataloader_stall",
]
# The extended set (issue 11): MLP, CNN and transformer runs with emulated shared-machine
# throughput noise, one run family per seed (EXT_RUNS), each class with its own seeds.
EXT_FAULT_KINDS = [
    "stall_noisy",       # class 1: a data-loader stall (~60x slower steps for 130 steps) on a noisy fast model
    "weight_jump",       # class 2: a component's weights x20 between two steps, outside the optimizer
    "nan_weight",        # class 3: one NaN written into one weight
    "label_onset",       # class 3: a label-corruption onset
    "nan_loss_recover",  # class 4: one NaN loss (the step is skipped), then finite points
    "val_divergence",    # class 5: validation divergence, evaluations every 100 steps
]
# The issue-20 set: ten more fault kinds and five benign kinds on the MLP, CNN, transformer and a
# character GRU, with the extended set's time model plus a run-level `step_time` point.
I20_FAULT_KINDS = [
    "loss_shift",       # a failed restore: restart phase, then a data pipeline broken for good (loss level up for good)
    "throughput_drop",  # every step ~10x its nominal time from s to the end (a slow disk)
    "update_surge",     # one component's Adam exp_avg_sq scaled by 1e-6 (a corrupted optimizer state)
    "grad_ramp",        # one component's .grad never zeroed from s (a gradient-accumulation bug)
    "step_drift",       # each step's simulated delay grows geometrically from s
    "grad_collapse",    # one component's gradients x1e-4 from s (a broken gradient-scaling hook)
    "telemetry_stop",   # one component's points stop being sent from s
    "lr_collapse",      # every parameter group's LR 0 (or 1e-9) from s
    "data_repeat",      # the data loader cycles through 4 batches from s
    "amp_skip",         # every step's gradients non-finite from s; the loss scaler skips every update
]
I20_BENIGN_KINDS = ["benign_noisy_eval", "benign_amp", "benign_batch_change", "benign_lr_schedules", "benign_slow_ckpt"]
I20_KINDS = I20_FAULT_KINDS + I20_BENIGN_KINDS
KINDS = FAULT_KINDS + ["benign"] + EXT_FAULT_KINDS + ["benign_noisy"] + I20_KINDS
BENIGN_KINDS = ("benign", "benign_noisy", *I20_BENIGN_KINDS)
# kind -> per seed: (model family, faulty component or "" for a run-level fault). Seeds below half
# the count are the tune half, the rest held out.
EXT_RUNS = {
    "stall_noisy": [("mlp", ""), ("cnn", ""), ("mlp", ""), ("cnn", "")],
    "weight_jump": [("mlp", "fc2"), ("cnn", "conv.1"), ("transformer", "blocks.1.mlp"),
                    ("mlp", "fc1"), ("cnn", "conv.2"), ("transformer", "blocks.0.attn")],
    "nan_weight": [("mlp", "fc1"), ("cnn", "conv.0"), ("cnn", "conv.2"), ("mlp", "head")],
    "label_onset": [("mlp", ""), ("cnn", ""), ("cnn", ""), ("mlp", "")],
    "nan_loss_recover": [("mlp", ""), ("cnn", ""), ("cnn", ""), ("mlp", "")],
    "val_divergence": [("mlp", ""), ("cnn", ""), ("cnn", ""), ("mlp", "")],
    "benign_noisy": [("mlp", ""), ("cnn", ""), ("mlp", ""), ("transformer", ""),
                     ("cnn", ""), ("mlp", ""), ("cnn", ""), ("transformer", "")],
    # the issue-20 set
    "loss_shift": [("mlp", ""), ("gru", ""), ("cnn", ""), ("transformer", "")],
    "throughput_drop": [("cnn", ""), ("mlp", ""), ("gru", ""), ("mlp", "")],
    "update_surge": [("mlp", "fc1"), ("gru", "rnn"), ("cnn", "conv.1"), ("transformer", "blocks.0.mlp")],
    "grad_ramp": [("cnn", "conv.2"), ("mlp", "fc2"), ("gru", "rnn"), ("cnn", "conv.0")],
    "step_drift": [("gru", ""), ("cnn", ""), ("mlp", ""), ("gru", "")],
    "grad_collapse": [("gru", "rnn"), ("transformer", "blocks.1.attn"), ("mlp", "fc1"), ("cnn", "conv.1")],
    "telemetry_stop": [("mlp", "fc2"), ("cnn", "conv.0"), ("transformer", "blocks.0.attn"), ("gru", "head")],
    "lr_collapse": [("cnn", ""), ("gru", ""), ("mlp", ""), ("transformer", "")],
    "data_repeat": [("gru", ""), ("mlp", ""), ("transformer", ""), ("cnn", "")],
    "amp_skip": [("mlp", ""), ("cnn", ""), ("gru", ""), ("mlp", "")],
    # s4-s7 came after the held-out half paged s3 (an MLP evaluated every 100 steps): two more runs of that
    # class to tune on (s4, s5) and two nobody tuned on (s6, s7); split by seed % 4, so s0-s3 keep theirs.
    "benign_noisy_eval": [("mlp", ""), ("gru", ""), ("cnn", ""), ("mlp", ""),
                          ("cnn", ""), ("mlp", ""), ("gru", ""), ("mlp", "")],
    "benign_amp": [("cnn", ""), ("mlp", ""), ("transformer", ""), ("gru", "")],
    "benign_batch_change": [("mlp", ""), ("cnn", ""), ("gru", ""), ("mlp", "")],
    "benign_lr_schedules": [("gru", ""), ("mlp", ""), ("cnn", ""), ("transformer", "")],  # step decay s0, s2; SGDR s1, s3
    "benign_slow_ckpt": [("mlp", ""), ("cnn", "")],
}
# The faulty component by seed (seed % 4); run-level faults have none.
FAULT_COMPONENTS = {
    "nan_weights": ["blocks.0.attn", "head", "blocks.1.mlp", "embed"],
    "component_blowup": ["blocks.1.mlp", "blocks.0.attn", "blocks.0.mlp", "blocks.1.attn"],
    "dead_layer": ["blocks.0.mlp", "blocks.1.attn", "blocks.1.mlp", "blocks.0.attn"],
    "frozen_layer": ["blocks.1.mlp", "embed", "blocks.0.attn", "head"],
}
FAULT_LAYER_METRICS = {
    "stall_noisy": ["throughput"],
    "weight_jump": ["weight_norm", "update_ratio", "act_norm", "grad_norm", "loss"],
    "nan_weight": ["weight_norm", "act_norm", "loss", "grad_norm"],
    "label_onset": ["loss", "grad_norm", "val_loss"],
    "nan_loss_recover": ["loss"],
    "val_divergence": ["val_loss", "loss"],
    "lr_spike": ["lr", "loss", "grad_norm"],
    "nan_weights": ["weight_norm", "act_norm", "loss", "grad_norm"],
    "component_blowup": ["grad_norm", "update_ratio"],
    "dead_layer": ["dead_fraction", "act_norm", "grad_norm", "update_ratio", "weight_norm"],
    "frozen_layer": ["update_ratio"],
    "label_corruption": ["loss", "val_loss"],
    "overfit_divergence": ["val_loss", "loss"],
    "dataloader_stall": ["throughput"],
    "loss_shift": ["loss", "val_loss"],
    "throughput_drop": ["throughput", "step_time"],
    "update_surge": ["update_ratio", "weight_norm"],
    "grad_ramp": ["grad_norm"],
    "step_drift": ["step_time", "throughput"],
    "grad_collapse": ["grad_norm", "update_ratio"],
    "telemetry_stop": ["grad_norm", "weight_norm", "update_ratio", "act_norm", "dead_fraction"],
    "lr_collapse": ["lr", "update_ratio"],
    "data_repeat": ["loss", "val_loss"],
    "amp_skip": ["grad_norm", "update_ratio", "loss"],
}
STALL_STEPS = 20
STALL_SLEEP = 0.15
NAN_TAIL = 50  # a nan_weights run is stopped this many steps after the NaN (its last step: s + 49)
OVERFIT_WINDOWS = 32  # the fixed training subset of an overfit_divergence run, in SEQ-long windows
OVERFIT_EVAL_EVERY = 25
BLOWUP_GROWTH = 1.25  # component_blowup: gradient multiplier growth per step ...
BLOWUP_CAP = 1e6  # ... up to this factor, where it stays (float32 Adam state stays finite)
# Extended set. Each step's time is the measured wall time plus a simulated delay (added to `time`
# and to the step's duration for `throughput`, not slept, so a 60x stall does not cost minutes of
# generation): a seeded shared-machine delay of nominal x min(Exp(mean NOISE_MEAN), NOISE_CAP) every
# step, the benign dips' (f - 1) x nominal, and the stall's (EXT_STALL_FACTOR - 1) x nominal.
# `nominal` is the run's own median measured step over steps 2-21 (NOMINAL_STEPS), so the ratios
# hold whatever the machine's load; NOMINAL_STEP_S stands in for it before step 21 (the 1st-21st
# steps get the noise only, no dip or stall can fall there).
NOMINAL_STEP_S = {"mlp": 0.003, "cnn": 0.004, "transformer": 0.02, "gru": 0.005}
NOMINAL_STEPS = (2, 21)
# Then the run's clock is rescaled (`rescale_time`) so that its nominal step becomes the family's
# step on an idle core: on a loaded shared machine the measured step of the MLP was 15-110 ms
# instead of about 1 ms, which would turn a stall of seconds into one of minutes. Every duration
# (measured part and simulated part alike) is multiplied by IDLE_STEP_S / nominal, so all ratios
# stay as generated. MLP 0.8 ms = 20,000 samples/s at batch 16 (the issue's MLP); transformer
# 15 ms = the original set's measured median (about 1,050 samples/s).
IDLE_STEP_S = {"mlp": 0.0008, "cnn": 0.0025, "transformer": 0.015, "gru": 0.003}
NOISE_MEAN = 0.6
NOISE_CAP = 3.0
EXT_STALL_STEPS = 130
EXT_STALL_FACTOR = 60  # the stall's data-loading sleep is (60 - 1) nominal steps
DIPS = 3  # benign_noisy: three dips of DIP_STEPS steps, each step (2..6) nominal steps slower
DIP_STEPS = 10
WEIGHT_JUMP = 20.0
# The issue-20 set (see Plan and generate_run).
DROP_FACTOR = 10          # throughput_drop: each step (DROP_FACTOR - 1) nominal steps slower from s
SURGE_SCALE = 1e-6        # update_surge: the component's exp_avg_sq x this at steps s..s+SURGE_STEPS-1
SURGE_STEPS = 1           # (one corrupted optimizer-state load)
COLLAPSE_SCALE = 1e-4     # grad_collapse: the component's gradients x this from s
REPEAT_BATCHES = 4        # data_repeat: the loader's cycle
NOISY_EVAL_BATCHES = 2    # benign_noisy_eval: 2 x 16 windows, drawn anew at each eval
SLOW_CKPT_S = 2.0         # benign_slow_ckpt: seconds of `time` the slow checkpoint step takes
LOADED_STEPS = 100        # benign_slow_ckpt: the loaded-machine stretch


def family_of(kind: str, seed: int) -> str:
    runs = EXT_RUNS.get(kind)
    return runs[seed % len(runs)][0] if runs else "transformer"


def ext_seeds(kind: str) -> range:
    return range(len(EXT_RUNS[kind]))


SPLIT_BY_FOUR = {"benign_noisy_eval"}  # kinds that grew after their first split: tune = seed % 4 in (0, 1)


def split_of(kind: str, seed: int) -> str:
    if kind in SPLIT_BY_FOUR:
        return "tune" if seed % 4 < 2 else "heldout"
    if kind in EXT_RUNS:
        return "tune" if seed < len(EXT_RUNS[kind]) // 2 else "heldout"
    if kind == "benign":
        return "tune" if seed <= 3 else "heldout"
    return "tune" if seed <= 1 else "heldout"


def run_id(kind: str, seed: int) -> str:
    return f"faults-{kind}-s{seed}"


# ----------------------------------------------------------------------------- data
EXCLUDED_DIRS = {"site-packages", "dist-packages", "test", "tests", "idlelib", "__pycache__",
                 "lib2to3", "ensurepip", "turtledemo"}
VOCAB = 97  # 0 = any other character, 1..95 = printable ASCII, 96 = newline


def stdlib_files() -> list[Path]:
    root = Path(os.path.dirname(os.__file__))
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS and not d.startswith("config-"))
        found.extend(Path(dirpath) / f for f in filenames if f.endswith(".py"))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def encode(text: str) -> np.ndarray:
    raw = np.frombuffer(text.replace("\t", "    ").encode("ascii", "replace"), dtype=np.uint8)
    ids = np.zeros(raw.shape, dtype=np.int64)
    printable = (raw >= 32) & (raw <= 126)
    ids[printable] = raw[printable] - 31
    ids[raw == 10] = 96
    return ids


class Corpus:
    """Three disjoint shards of the standard library's .py text, files dealt round-robin in sorted order:
    shard A (files 0, 3, 6, ...), shard B (1, 4, 7, ...) and validation (2, 5, 8, ...), each capped."""

    CAP = {"A": 3_000_000, "B": 3_000_000, "val": 400_000}

    def __init__(self):
        files = stdlib_files()
        root = Path(os.path.dirname(os.__file__))
        texts = {"A": [], "B": [], "val": []}
        sizes = {k: 0 for k in texts}
        digest = hashlib.sha256()
        for i, path in enumerate(files):
            shard = ("A", "B", "val")[i % 3]
            if sizes[shard] >= self.CAP[shard]:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + text.encode("utf-8", "replace"))
            texts[shard].append(text)
            sizes[shard] += len(text)
        self.shards = {k: encode("\n".join(v)) for k, v in texts.items()}
        self.files = len(files)
        self.sha256 = digest.hexdigest()
        self.python = platform.python_version()
        self.root = str(root)
        # A fixed validation set: EVAL_BATCHES x BATCH windows at evenly spaced offsets.
        val = self.shards["val"]
        offsets = np.linspace(0, len(val) - SEQ - 2, EVAL_BATCHES * BATCH).astype(np.int64)
        x, y = self.windows(val, offsets)
        self.val = [(x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]) for i in range(EVAL_BATCHES)]

    @staticmethod
    def windows(data: np.ndarray, offsets: np.ndarray, seq: int = SEQ):
        idx = offsets[:, None] + np.arange(seq + 1)[None, :]
        chunk = torch.from_numpy(data[idx])
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()


# ----------------------------------------------------------------------------- model
class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(SEQ, D_MODEL)

    def forward(self, idx):
        return self.tok(idx) + self.pos.weight[: idx.shape[1]]


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL, bias=False)
        self.proj = nn.Linear(D_MODEL, D_MODEL, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D_MODEL)
        self.fc1 = nn.Linear(D_MODEL, HIDDEN, bias=True)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(HIDDEN, D_MODEL, bias=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(self.ln(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D_MODEL)
        self.out = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, x):
        return self.out(self.ln(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = Embed()
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = Head()

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class Dense(nn.Module):
    """Linear + ReLU; with `context` > 1 it first concatenates each token's last `context` embeddings
    (zero-padded at the window's start), so the MLP predicts the next character from them."""

    def __init__(self, d_in: int, d_out: int, context: int = 1):
        super().__init__()
        self.context = context
        self.lin = nn.Linear(d_in * context, d_out)
        self.act = nn.ReLU()

    def forward(self, x):
        if self.context > 1:
            b, t, d = x.shape
            padded = F.pad(x, (0, 0, self.context - 1, 0))
            x = padded.unfold(1, self.context, 1).transpose(2, 3).reshape(b, t, self.context * d)
        return self.act(self.lin(x))


MLP_EMBED, MLP_CONTEXT, MLP_HIDDEN = 16, 8, 128


class MLPNet(nn.Module):
    """A next-character MLP: embed (97 x 16), fc1 (8 x 16 -> 128, ReLU), fc2 (128 -> 128, ReLU), head (128 -> 97)."""

    COMPONENTS = ["embed", "fc1", "fc2", "head"]

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, MLP_EMBED)
        self.fc1 = Dense(MLP_EMBED, MLP_HIDDEN, MLP_CONTEXT)
        self.fc2 = Dense(MLP_HIDDEN, MLP_HIDDEN)
        self.head = nn.Linear(MLP_HIDDEN, VOCAB)

    def forward(self, idx):
        return self.head(self.fc2(self.fc1(self.embed(idx))))


class CausalConv(nn.Module):
    """Conv1d over time, left-padded so a position sees only itself and earlier ones, then ReLU; residual when shapes agree."""

    def __init__(self, channels: int, kernel: int, dilation: int, residual: bool):
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.residual = residual
        self.conv = nn.Conv1d(channels, channels, kernel, dilation=dilation)
        self.act = nn.ReLU()

    def forward(self, x):  # x: batch, time, channels
        y = self.act(self.conv(F.pad(x.transpose(1, 2), (self.pad, 0))).transpose(1, 2))
        return x + y if self.residual else y


CNN_CHANNELS, CNN_KERNEL = 48, 4


class CNNNet(nn.Module):
    """A causal 1-D CNN over characters: embed (97 x 48), conv.0-2 (kernel 4, dilation 1/2/4, ReLU; 1-2 residual), head (48 -> 97)."""

    COMPONENTS = ["embed", "conv.0", "conv.1", "conv.2", "head"]

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, CNN_CHANNELS)
        self.conv = nn.ModuleList(CausalConv(CNN_CHANNELS, CNN_KERNEL, 2 ** i, residual=i > 0) for i in range(3))
        self.head = nn.Linear(CNN_CHANNELS, VOCAB)

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.conv:
            x = layer(x)
        return self.head(x)


GRU_EMBED, GRU_HIDDEN = 32, 96


class Recurrent(nn.Module):
    """A one-layer GRU (batch first) that returns only its output sequence (so the forward hooks see one tensor)."""

    def __init__(self, d_in: int, d_hidden: int):
        super().__init__()
        self.gru = nn.GRU(d_in, d_hidden, batch_first=True)

    def forward(self, x):
        return self.gru(x)[0]


class GRUNet(nn.Module):
    """A character GRU: embed (97 x 32), rnn (GRU 32 -> 96, one layer), head (96 -> 97)."""

    COMPONENTS = ["embed", "rnn", "head"]

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, GRU_EMBED)
        self.rnn = Recurrent(GRU_EMBED, GRU_HIDDEN)
        self.head = nn.Linear(GRU_HIDDEN, VOCAB)

    def forward(self, idx):
        return self.head(self.rnn(self.embed(idx)))


FAMILIES = {
    # family: model, component names, training window length, description (the run line's config)
    "transformer": (Model, COMPONENTS, SEQ, f"pre-LN char transformer, {LAYERS} blocks, d_model {D_MODEL}, {HEADS} heads, mlp {HIDDEN}, vocab {VOCAB}"),
    "mlp": (MLPNet, MLPNet.COMPONENTS, 32, f"next-char MLP, context {MLP_CONTEXT} x embed {MLP_EMBED}, hidden {MLP_HIDDEN} x 2 (ReLU), vocab {VOCAB}"),
    "cnn": (CNNNet, CNNNet.COMPONENTS, 32, f"causal char CNN, 3 conv layers ({CNN_CHANNELS} channels, kernel {CNN_KERNEL}, dilation 1/2/4), vocab {VOCAB}"),
    "gru": (GRUNet, GRUNet.COMPONENTS, 32, f"char GRU, embed {GRU_EMBED}, one GRU layer of {GRU_HIDDEN}, vocab {VOCAB}"),
}


class Probe:
    """Forward hooks: per component, the mean L2 norm of its output vectors and the share of its
    output units that are dead for the whole batch (MLP: hidden ReLU units <= 0; others: |x| < 1e-6)."""

    def __init__(self, model: nn.Module, names: list[str] = COMPONENTS):
        self.out = {}
        self.active = False
        self.names = names
        modules = dict(model.named_modules())
        # A component with a ReLU called `act` (the transformer's MLPs, the MLP's and CNN's hidden
        # layers) is judged by its hidden units; the others by their output features.
        self.relu = {name for name in names if isinstance(getattr(modules[name], "act", None), nn.ReLU)}
        for name in names:
            modules[name].register_forward_hook(self._hook(name, "act"))
            if name in self.relu:
                modules[name].act.register_forward_hook(self._hook(name, "relu"))

    def _hook(self, name, what):
        def hook(module, inputs, output):
            if self.active:
                self.out[(name, what)] = output.detach()
        return hook

    def read(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        norms, dead = [], []
        for name in self.names:
            out = self.out[(name, "act")]
            norms.append(torch.linalg.vector_norm(out, dim=-1).mean())
            if name in self.relu:
                dead.append((self.out[(name, "relu")] <= 0).all(dim=1).all(dim=0).float().mean())
            else:
                dead.append((out.abs() < 1e-6).all(dim=1).all(dim=0).float().mean())
        return norms, dead


def component_params(model: nn.Module, names: list[str] = COMPONENTS) -> dict[str, list[nn.Parameter]]:
    modules = dict(model.named_modules())
    return {name: list(modules[name].parameters()) for name in names}


def make_optimizer(model: nn.Module, names: list[str] = COMPONENTS) -> torch.optim.AdamW:
    groups = []
    for name, params in component_params(model, names).items():
        decay = [p for p in params if p.dim() >= 2]
        plain = [p for p in params if p.dim() < 2]
        groups.append({"params": decay, "weight_decay": WEIGHT_DECAY, "component": name, "lr_mult": 1.0})
        groups.append({"params": plain, "weight_decay": 0.0, "component": name, "lr_mult": 1.0})
    return torch.optim.AdamW(groups, lr=PEAK_LR, betas=BETAS, eps=1e-8)


def scheduled_lr(step: int, schedule: tuple | None = None) -> float:
    """The LR of a step: linear warmup, then cosine decay to MIN_LR at STEPS, or (benign_lr_schedules)
    ("step", m1, m2): PEAK_LR x 0.1 from m1 and x 0.01 from m2; ("sgdr", period): cosine from PEAK_LR to
    MIN_LR over `period` steps, restarted at PEAK_LR every `period` steps (SGDR warm restarts)."""
    if step <= WARMUP:
        return PEAK_LR * step / WARMUP
    if schedule and schedule[0] == "step":
        return PEAK_LR * (0.1 if step >= schedule[1] else 1.0) * (0.1 if step >= schedule[2] else 1.0)
    if schedule and schedule[0] == "sgdr":
        progress = ((step - WARMUP - 1) % schedule[1]) / schedule[1]
        return MIN_LR + 0.5 * (PEAK_LR - MIN_LR) * (1 + math.cos(math.pi * progress))
    if step <= WARMUP:
        return PEAK_LR * step / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    return MIN_LR + 0.5 * (PEAK_LR - MIN_LR) * (1 + math.cos(math.pi * progress))


# ----------------------------------------------------------------------------- wire format
def num(value: float) -> str:
    if value != value:
        return '"NaN"'
    if value == math.inf:
        return '"Infinity"'
    if value == -math.inf:
        return '"-Infinity"'
    return format(value, ".7g")


class Writer:
    def __init__(self, rid: str):
        self.rid = rid
        self.lines: list[str] = []
        self.prefix = '{"type":"point","run":"%s","step":' % rid

    def run_line(self, obj: dict):
        self.lines.append(json.dumps({"type": "run", **obj}, separators=(",", ":")))

    def phase(self, step: int, phase: str, t: float):
        self.lines.append('{"type":"phase","run":"%s","step":%d,"phase":"%s","time":%.3f}' % (self.rid, step, phase, t))

    def point(self, step: int, metric: str, value: float, t: str, component: str | None = None):
        comp = '' if component is None else ',"component":"%s"' % component
        self.lines.append('%s%d,"metric":"%s"%s,"value":%s,"time":%s}' % (self.prefix, step, metric, comp, num(value), t))

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


# ----------------------------------------------------------------------------- one run
class Plan:
    """What happens in one run: the fault (if any), and the benign events."""

    def __init__(self, kind: str, seed: int):
        self.kind, self.seed = kind, seed
        k = KINDS.index(kind)
        rng = np.random.default_rng([seed, k, 20251129])
        self.component = ""
        self.start = self.end = None
        self.params: dict = {}
        self.restart = self.refresh = None
        self.checkpoints = set(CHECKPOINTS)
        self.last_step = STEPS
        self.family = family_of(kind, seed)
        self.ext = kind in EXT_RUNS
        self.dips: list[tuple[int, float]] = []  # (first step, slowdown factor) of each benign dip
        # The issue-20 set.
        self.i20 = kind in I20_KINDS
        self.restart_at = None      # loss_shift: the restart phase's step
        self.amp_skips: set[int] = set()  # benign_amp: steps whose update the loss scaler skips
        self.batch_change = None    # benign_batch_change: the earliest step for it (the step is chosen in generate_run)
        self.schedule = None        # benign_lr_schedules: ("step", m1, m2) or ("sgdr", period)
        self.slow_ckpt = None       # benign_slow_ckpt: the slow checkpoint's step
        self.loaded = None          # benign_slow_ckpt: (first step, noise factor) of the loaded stretch
        self.eval_every = EVAL_EVERY
        self.train_chars = None     # benign_noisy_eval: training on the first N characters of shard A
        if self.i20 and kind not in BENIGN_KINDS:
            self.component = EXT_RUNS[kind][seed % len(EXT_RUNS[kind])][1]
            busy = set()
            for e in list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY)) + list(CHECKPOINTS):
                busy.update(range(e - 1, e + 12))
            while True:
                self.start = int(rng.integers(250, 401 if kind == "step_drift" else 551))
                # loss_shift's checkpoint (s - 1), restart (s) and steady (s + 10) away from evals and checkpoints
                if kind != "loss_shift" or not busy.intersection(range(self.start - 1, self.start + 11)):
                    break
            if kind == "loss_shift":
                self.restart_at = self.start
                self.checkpoints.add(self.start - 1)
                self.params = {"corrupt_fraction": round(float(rng.uniform(0.05, 0.09)), 3),
                               "how": "checkpoint at s-1, crash, restore, 'restart' phase at s; the restored job's data loader decodes with a broken character table: "
                                      "that fraction of the stream's characters (inputs and targets alike) come out as random symbols, for good"}
            elif kind == "throughput_drop":
                self.params = {"slowdown": DROP_FACTOR}
            elif kind == "update_surge":
                self.params = {"exp_avg_sq_scale": SURGE_SCALE, "steps": SURGE_STEPS}
            elif kind == "grad_ramp":
                self.params = {"how": "the component's .grad is not zeroed from step s on: each step's gradient is added to all the earlier ones since s-1"}
            elif kind == "step_drift":
                end_factor = round(float(rng.uniform(5.0, 7.0)), 2)
                self.params = {"end_factor": end_factor, "growth_per_step": round(end_factor ** (1.0 / (STEPS - self.start + 1)), 6)}
            elif kind == "grad_collapse":
                self.params = {"gradient_multiplier": COLLAPSE_SCALE}
            elif kind == "lr_collapse":
                self.params = {"lr": 0.0 if seed % 2 == 0 else 1e-9}
            elif kind == "data_repeat":
                self.params = {"batches": REPEAT_BATCHES}
            elif kind == "amp_skip":
                self.params = {"how": "the loss is multiplied by inf before backward at every step from s (a loss scale gone to inf); every gradient is non-finite and the scaler skips every update"}
        elif self.i20:
            if kind == "benign_noisy_eval":
                self.eval_every = 50 if seed % 2 == 0 else 100
                self.train_chars = int(rng.integers(28_000, 40_001))
                self.params = {"eval_windows": NOISY_EVAL_BATCHES * BATCH, "eval_every": self.eval_every, "train_chars": self.train_chars}
            elif kind == "benign_amp":
                first = int(rng.integers(3, 6))
                self.amp_skips = set(range(1, first + 1))
                t = first + int(rng.integers(150, 301))
                while t <= STEPS:
                    self.amp_skips.add(t)
                    t += int(rng.integers(150, 301))
            elif kind == "benign_batch_change":
                self.batch_change = int(rng.integers(250, 451))
            elif kind == "benign_lr_schedules":
                if seed % 2 == 0:
                    self.schedule = ("step", int(rng.integers(250, 351)), int(rng.integers(450, 551)))
                else:
                    self.schedule = ("sgdr", int(rng.integers(140, 161)))
            elif kind == "benign_slow_ckpt":
                self.slow_ckpt = CHECKPOINTS[seed % 2]
                while True:
                    a = int(rng.integers(100, STEPS - LOADED_STEPS))
                    if not set(range(a - 20, a + LOADED_STEPS + 20)).intersection({self.slow_ckpt}):
                        break
                self.loaded = (a, round(float(rng.uniform(1.5, 2.0)), 2))
        elif self.ext and kind not in BENIGN_KINDS:
            # Its own generator (the original kinds' draws are left as they were).
            self.start = int(rng.integers(250, 501 if kind == "stall_noisy" else 551))
            self.component = EXT_RUNS[kind][seed % len(EXT_RUNS[kind])][1]
            if kind == "stall_noisy":
                self.end = self.start + EXT_STALL_STEPS - 1
                self.params = {"slowdown": EXT_STALL_FACTOR, "steps": EXT_STALL_STEPS}
            elif kind == "weight_jump":
                self.params = {"factor": WEIGHT_JUMP, "what": "every parameter tensor of the component with 2 or more dimensions (its weight matrices/kernels; not biases or LayerNorm gains)"}
            elif kind == "nan_weight":
                self.last_step = self.start + NAN_TAIL - 1
            elif kind == "label_onset":
                self.params = {"fraction": round(float(rng.uniform(0.5, 1.0)), 2)}
            elif kind == "nan_loss_recover":
                self.end = self.start
                self.params = {"how": "one sample of the batch carries a NaN loss weight; the loop's non-finite guard skips backward and the update at that step (as AMP's GradScaler does) and training goes on"}
            elif kind == "val_divergence":
                self.params = {"windows": OVERFIT_WINDOWS, "eval_every": EVAL_EVERY,
                               "first_eval_step": (self.start + EVAL_EVERY - 1) // EVAL_EVERY * EVAL_EVERY}
        elif kind not in BENIGN_KINDS:
            self.start = int(rng.integers(250, 551))
            if kind in FAULT_COMPONENTS:
                options = FAULT_COMPONENTS[kind]
                self.component = options[seed % len(options)]
            if kind == "lr_spike":
                self.params = {"factor": int(rng.integers(30, 101)), "steps": 10}
                self.end = self.start + 9
            elif kind == "nan_weights":
                self.last_step = self.start + NAN_TAIL - 1
            elif kind == "component_blowup":
                self.params = {"gradient_multiplier": f"min({BLOWUP_GROWTH}^(step - start + 1), {BLOWUP_CAP:g})"}
            elif kind == "label_corruption":
                self.params = {"fraction": round(float(rng.uniform(0.5, 1.0)), 2)}
            elif kind == "overfit_divergence":
                self.params = {"windows": OVERFIT_WINDOWS, "eval_every": OVERFIT_EVAL_EVERY}
            elif kind == "dataloader_stall":
                self.params = {"sleep_s": STALL_SLEEP, "steps": STALL_STEPS}
                self.end = self.start + STALL_STEPS - 1
        else:
            # A restart from a checkpoint at c (not near an eval or a regular checkpoint), crash at
            # c + k, and a data refresh away from both.
            busy = set()
            for e in list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY)) + list(CHECKPOINTS):
                busy.update(range(e - 12, e + 13))
            while True:
                c = int(rng.integers(180, 560))
                k = int(rng.integers(30, 81))
                if c not in busy and (c + 11) not in busy:
                    break
            self.restart = (c, k)
            self.checkpoints.add(c)
            blocked = busy | set(range(c - 15, c + k + 15))
            while True:
                r = int(rng.integers(200, 640))
                if not blocked.intersection(range(r, r + 11)):
                    break
            self.refresh = r
            if kind == "benign_noisy":
                # Three short dips of 2-6x slower steps (another job's burst on a shared machine),
                # away from the restart, the refresh and each other.
                blocked |= set(range(r - 5, r + 16))
                while len(self.dips) < DIPS:
                    d = int(rng.integers(60, STEPS - DIP_STEPS - 5))
                    f = round(float(rng.uniform(2.0, 6.0)), 2)
                    if not blocked.intersection(range(d - 5, d + DIP_STEPS + 5)):
                        self.dips.append((d, f))
                        blocked |= set(range(d - 20, d + DIP_STEPS + 20))
                self.dips.sort()
        self.evals = set(range(self.eval_every, STEPS + 1, self.eval_every))
        if kind == "overfit_divergence":
            self.evals |= {e for e in range(OVERFIT_EVAL_EVERY, STEPS + 1, OVERFIT_EVAL_EVERY) if e >= self.start}
        self.evals = {e for e in self.evals if e <= self.last_step}
        self.checkpoints = {c for c in self.checkpoints if c <= self.last_step}

    def phases_at(self, step: int, replay_start: int | None = None) -> list[str]:
        """Phase lines to send at `step` (in order). replay_start: the first step re-sent after a restart."""
        out = []
        if step == 1:
            out.append("warmup")
        if step == WARMUP + 1:
            out.append("steady")
        if replay_start is not None and step == replay_start:
            return ["restart"]
        if self.restart_at is not None and step == self.restart_at:
            return ["restart"]
        if self.restart_at is not None and step == self.restart_at + 10:
            out.append("steady")
        if replay_start is not None and step == replay_start + 10:
            out.append("steady")
        if self.refresh is not None and step == self.refresh:
            out.append("data_refresh")
        if self.refresh is not None and step == self.refresh + 10:
            out.append("steady")
        if step - 1 in self.evals or step - 1 in self.checkpoints:
            if "steady" not in out and step <= self.last_step:
                out.append("steady")
        if step in self.checkpoints:
            out = [p for p in out if p != "steady"] + ["checkpoint"]
        if step in self.evals:
            out = [p for p in out if p != "steady"] + ["eval"]
        return out


def generate_run(kind: str, seed: int, corpus: Corpus, offset: int) -> tuple[str, dict, dict]:
    torch.set_num_threads(1)
    plan = Plan(kind, seed)
    rid = run_id(kind, seed)
    torch.manual_seed(seed)
    np.random.seed(seed)
    build, names, seq, description = FAMILIES[plan.family]
    plan.components = names
    model = build()
    opt = make_optimizer(model, names)
    probe = Probe(model, names)
    cparams = component_params(model, names)
    all_params = [p for p in model.parameters()]
    # Shared-machine noise of the extended set: its own seeded generator, so training values do not depend on it.
    noise_rng = np.random.default_rng([seed, KINDS.index(kind), 7]) if plan.ext else None
    nominal = NOMINAL_STEP_S[plan.family]  # until the run has measured its own (steps NOMINAL_STEPS)
    measured: list[float] = []
    data_gen = torch.Generator().manual_seed(1000 + seed)
    fault_gen = torch.Generator().manual_seed(2000 + seed)
    shard = "A"

    w = Writer(rid)
    config = {
        "model": description,
        "params": sum(p.numel() for p in all_params),
        "optimizer": "AdamW", "lr": PEAK_LR, "min_lr": MIN_LR, "warmup_steps": WARMUP, "schedule": "linear warmup, cosine decay",
        "betas": list(BETAS), "weight_decay": WEIGHT_DECAY, "grad_clip": None,
        "batch_size": BATCH, "seq_len": seq, "seed": seed,
        "data": f"CPython {corpus.python} standard library .py files (sha256 {corpus.sha256[:16]})",
        "torch": torch.__version__, "threads": 1,
    }
    if plan.schedule is not None:
        config["schedule"] = (f"linear warmup, step decay x0.1 at steps {plan.schedule[1]} and {plan.schedule[2]}" if plan.schedule[0] == "step"
                              else f"linear warmup, cosine with warm restarts (SGDR) every {plan.schedule[1]} steps")
    if plan.kind == "benign_noisy_eval":
        config["eval"] = f"{NOISY_EVAL_BATCHES} x {BATCH} validation windows drawn anew at each eval, every {plan.eval_every} steps"
        config["train_chars"] = plan.train_chars
    run_obj = {
        "id": rid,
        "name": f"faults corpus: {kind}, seed {seed} ({plan.family if plan.ext else 'char transformer'} on the Python stdlib, CPU)",
        "tags": {"corpus": "faults", "kind": kind, "seed": str(seed), "split": split_of(kind, seed)},
        "config": config,
        "budget": {"steps": STEPS},
    }
    w.run_line(run_obj)
    # The issue-20 set's own state.
    bs = BATCH              # the batch size (benign_batch_change doubles it)
    lr_mult = 1.0           # ... and the LR with it
    changed_at = None       # the step of benign_batch_change's new run line
    repeat_cycle = None     # data_repeat: the loader's 4 batches
    ramp_acc = None         # grad_ramp: the component's accumulated gradients
    eval_gen = torch.Generator().manual_seed(3000 + seed)  # benign_noisy_eval's fresh eval windows

    tmp = tempfile.TemporaryDirectory(prefix="faults-ckpt-")
    clock = float(T0 + offset)
    overfit_x = overfit_y = None
    overfit_cursor = 0
    replay_start = None
    crashed = False
    history = {"replay_loss": {}, "loss": {}, "val_loss": {}, "throughput": {}, "lr": {}, "grad_norm": {}, "comp": {}, "clock": {}}
    val_log = []

    def evaluate() -> float:
        model.eval()
        total = 0.0
        batches = corpus.val
        if kind == "benign_noisy_eval":
            val = corpus.shards["val"]
            offs = torch.randint(0, len(val) - seq - 2, (NOISY_EVAL_BATCHES * BATCH,), generator=eval_gen).numpy()
            vx, vy = Corpus.windows(val, offs, seq)
            batches = [(vx[i * BATCH:(i + 1) * BATCH], vy[i * BATCH:(i + 1) * BATCH]) for i in range(NOISY_EVAL_BATCHES)]
        with torch.no_grad():
            for x, y in batches:
                logits = model(x)
                total += F.cross_entropy(logits.view(-1, VOCAB), y.view(-1)).item()
        model.train()
        return total / len(batches)

    def save_state(path: Path, step: int):
        torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                    "data_gen": data_gen.get_state(), "fault_gen": fault_gen.get_state(),
                    "shard": shard}, path)

    step = 1
    wall_prev = time.perf_counter()
    while step <= plan.last_step:
        if plan.batch_change is not None and changed_at is None and step >= plan.batch_change:
            # The job doubles its batch (and its LR) and says so with a new run line: at the first step from
            # the drawn one whose run line falls within the first 40 lines of a 2,000-line batch of run.py's
            # replay (the console records the identity change at the batch's first step: this step or the one
            # before), or 120 steps later whatever the alignment.
            if len(w.lines) % 2000 < 40 or step >= plan.batch_change + 120:
                changed_at = step
                bs, lr_mult = 2 * BATCH, 2.0
                run_obj = {**run_obj, "config": {**config, "batch_size": bs, "lr": PEAK_LR * lr_mult, "min_lr": MIN_LR * lr_mult,
                                                 "batch_change": f"batch {BATCH} -> {bs} and LR x2 from step {step}"}}
                w.run_line(run_obj)
                plan.params = {**plan.params, "step": step, "batch": [BATCH, bs], "lr_mult": lr_mult, "run_line_index": len(w.lines) - 1}
        for phase in plan.phases_at(step, replay_start):
            w.phase(step, phase, clock)
        if plan.refresh is not None and step == plan.refresh:
            shard = "B"

        # ---- data
        data = corpus.shards[shard]
        if plan.train_chars:
            data = data[:plan.train_chars]
        offsets = torch.randint(0, len(data) - seq - 2, (bs,), generator=data_gen).numpy()
        x, y = Corpus.windows(data, offsets, seq)
        if kind == "loss_shift" and step >= plan.start:
            # The restored job's broken character table: a fraction of the stream's characters come out as random symbols.
            chunk = torch.cat([x, y[:, -1:]], dim=1)
            mask = torch.rand(chunk.shape, generator=fault_gen) < plan.params["corrupt_fraction"]
            chunk = torch.where(mask, torch.randint(1, VOCAB, chunk.shape, generator=fault_gen), chunk)
            x, y = chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()
        if kind == "data_repeat" and step >= plan.start:
            if repeat_cycle is None:
                # The loader's next REPEAT_BATCHES batches, then round and round.
                repeat_cycle = [(x, y)] + [Corpus.windows(data, torch.randint(0, len(data) - seq - 2, (bs,), generator=data_gen).numpy(), seq)
                                           for _ in range(REPEAT_BATCHES - 1)]
            x, y = repeat_cycle[(step - plan.start) % REPEAT_BATCHES]
        if kind in ("overfit_divergence", "val_divergence") and step >= plan.start:
            if overfit_x is None:
                sub = torch.randint(0, len(data) - seq - 2, (OVERFIT_WINDOWS,), generator=fault_gen).numpy()
                overfit_x, overfit_y = Corpus.windows(data, sub, seq)
            sel = [(overfit_cursor + i) % OVERFIT_WINDOWS for i in range(BATCH)]
            overfit_cursor = (overfit_cursor + BATCH) % OVERFIT_WINDOWS
            x, y = overfit_x[sel], overfit_y[sel]
        if kind in ("label_corruption", "label_onset") and step >= plan.start:
            flat = y.reshape(-1).clone()
            n = flat.numel()
            chosen = torch.randperm(n, generator=fault_gen)[: int(round(plan.params["fraction"] * n))]
            flat[chosen] = flat[chosen[torch.randperm(len(chosen), generator=fault_gen)]]
            y = flat.view_as(y)
        if kind == "dataloader_stall" and plan.start <= step <= plan.end:
            time.sleep(STALL_SLEEP)
        extra = 0.0
        if plan.ext:
            # Other jobs on a shared machine: a seeded extra delay every step, a slow dip now and then,
            # and the stall; in multiples of this run's own measured step time (see NOMINAL_STEPS).
            noise = min(float(noise_rng.exponential(NOISE_MEAN)), NOISE_CAP)
            if plan.loaded and plan.loaded[0] <= step < plan.loaded[0] + LOADED_STEPS:
                noise *= plan.loaded[1]  # a loaded machine: the noise 1.5-2x larger
            extra = nominal * noise
            if changed_at is not None:
                # The doubled batch: twice the compute. Measured: this step at batch 32; simulated: one more nominal step and the noise of two.
                extra += nominal * (1.0 + noise)
            if kind == "throughput_drop" and step >= plan.start:
                extra += (DROP_FACTOR - 1) * nominal
            if kind == "step_drift" and step >= plan.start:
                extra += nominal * (plan.params["growth_per_step"] ** (step - plan.start + 1) - 1.0)
            if plan.slow_ckpt == step:
                extra += SLOW_CKPT_S * nominal / IDLE_STEP_S[plan.family]  # SLOW_CKPT_S of `time` after the rescaling
            for d, f in plan.dips:
                if d <= step < d + DIP_STEPS:
                    extra += (f - 1.0) * nominal
            if kind == "stall_noisy" and plan.start <= step <= plan.end:
                extra += (EXT_STALL_FACTOR - 1) * nominal

        # ---- injections before the forward pass
        lr = scheduled_lr(step, plan.schedule) * lr_mult
        if kind == "lr_collapse" and step >= plan.start:
            lr = plan.params["lr"]
        if kind == "lr_spike" and plan.start <= step <= plan.end:
            lr = lr * plan.params["factor"]
        comp_mods = dict(model.named_modules())
        if step == plan.start:
            if kind == "nan_weights":
                with torch.no_grad():
                    target = {"embed": comp_mods["embed"].pos.weight, "head": comp_mods["head"].out.weight}.get(plan.component)
                    if target is None:
                        mod = comp_mods[plan.component]
                        target = mod.qkv.weight if hasattr(mod, "qkv") else mod.fc1.weight
                    r = int(torch.randint(0, target.shape[0], (1,), generator=fault_gen))
                    c = int(torch.randint(0, target.shape[1], (1,), generator=fault_gen))
                    if plan.component == "embed":
                        target[:, c] = float("nan")  # every position's embedding
                        plan.params = {"tensor": "embed.pos.weight", "column": c}
                    else:
                        target[r, c] = float("nan")
                        name = [n for n, p in model.named_parameters() if p is target][0]
                        plan.params = {"tensor": name, "index": [r, c]}
            elif kind == "dead_layer":
                mod = comp_mods[plan.component]
                with torch.no_grad():
                    if hasattr(mod, "fc1"):
                        mod.fc1.weight.zero_()
                        mod.fc1.bias.fill_(-0.1)  # every ReLU input is -0.1, for every token, from now on
                        plan.params = {"how": "fc1 weights zeroed and fc1 bias set to -0.1 (every ReLU input -0.1)"}
                    else:
                        mod.qkv.weight.zero_()
                        mod.proj.weight.zero_()
                        plan.params = {"how": "qkv and proj weights zeroed"}
                for p in cparams[plan.component]:
                    state = opt.state.get(p)
                    if state:
                        state["exp_avg"].zero_()
                        state["exp_avg_sq"].zero_()
            elif kind == "weight_jump":
                # Outside the optimizer, between step s-1's update and step s's forward pass (a bad
                # checkpoint merge, a scaling bug in a hand-written re-init): the weights x20.
                with torch.no_grad():
                    scaled = [n for n, p in comp_mods[plan.component].named_parameters() if p.dim() >= 2]
                    for p in cparams[plan.component]:
                        if p.dim() >= 2:
                            p.mul_(WEIGHT_JUMP)
                plan.params = {**plan.params, "tensors": [f"{plan.component}.{n}" for n in scaled]}
            elif kind == "nan_weight":
                with torch.no_grad():
                    named = [(n, p) for n, p in comp_mods[plan.component].named_parameters() if p.dim() >= 2]
                    name, target = named[0]
                    index = [int(torch.randint(0, size, (1,), generator=fault_gen)) for size in target.shape]
                    if plan.component == "embed":
                        index[0] = 1  # the space character's row, so the NaN is in every batch's forward pass
                    target[tuple(index)] = float("nan")
                plan.params = {**plan.params, "tensor": f"{plan.component}.{name}", "index": index}
            elif kind == "frozen_layer":
                for g in opt.param_groups:
                    if g["component"] == plan.component:
                        g["lr_mult"] = 0.0
                plan.params = {"how": "the component's parameter groups get learning rate 0"}
        for g in opt.param_groups:
            g["lr"] = lr * g["lr_mult"]

        # ---- forward / backward
        probe.active = True
        logits = model(x)
        probe.active = False
        skipped = kind == "nan_loss_recover" and step == plan.start
        if skipped:
            # One corrupt sample: its loss weight is NaN, so the batch loss is NaN.
            per_sample = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1), reduction="none").view(y.shape).mean(dim=1)
            weights = torch.ones_like(per_sample)
            bad = int(torch.randint(0, len(weights), (1,), generator=fault_gen))
            weights[bad] = float("nan")
            plan.params = {**plan.params, "sample": bad}
            loss = (per_sample * weights).mean()
        else:
            loss = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        # A loss scaler's overflow: the scaled loss's gradients are non-finite, the update is skipped.
        overflow = step in plan.amp_skips or (kind == "amp_skip" and step >= plan.start)
        if overflow:
            (loss * float("inf")).backward()
        elif not skipped:  # the loop's non-finite guard: no backward, no update at this step
            loss.backward()
        if kind == "grad_ramp" and step >= plan.start - 1:
            # From step s the component's .grad is never zeroed: each step's gradient adds to the sum since s-1.
            with torch.no_grad():
                if ramp_acc is not None:
                    for p, acc in zip(cparams[plan.component], ramp_acc):
                        p.grad.add_(acc)
                ramp_acc = [p.grad.detach().clone() for p in cparams[plan.component]]
        if kind == "grad_collapse" and step >= plan.start:
            for p in cparams[plan.component]:
                if p.grad is not None:
                    p.grad.mul_(COLLAPSE_SCALE)
        if kind == "update_surge" and plan.start <= step < plan.start + SURGE_STEPS:
            with torch.no_grad():
                for p in cparams[plan.component]:
                    opt.state[p]["exp_avg_sq"].mul_(SURGE_SCALE)
        if kind == "component_blowup" and step >= plan.start:
            mult = min(BLOWUP_GROWTH ** (step - plan.start + 1), BLOWUP_CAP)
            for p in cparams[plan.component]:
                if p.grad is not None:
                    p.grad.mul_(mult)

        with torch.no_grad():
            act_norms, dead = probe.read()
            before = [torch.cat([p.detach().reshape(-1) for p in cparams[n]]) for n in names]
            grad_sq = []
            for n in names:
                gs = [p.grad.reshape(-1) for p in cparams[n] if p.grad is not None]
                grad_sq.append(torch.cat(gs).double().square().sum() if gs else torch.zeros((), dtype=torch.float64))
        if not skipped and not overflow:
            opt.step()
        with torch.no_grad():
            after = [torch.cat([p.detach().reshape(-1) for p in cparams[n]]) for n in names]
            w_norms = [torch.linalg.vector_norm(b) for b in before]  # the weights this step's forward pass used
            upd = [torch.linalg.vector_norm(a - b) / wn for a, b, wn in zip(after, before, w_norms)]
            stats = torch.stack([x.double() for x in (loss.detach(), torch.stack(grad_sq).sum().sqrt(), *[g.sqrt() for g in grad_sq],
                                 *w_norms, *upd, *act_norms, *dead)]).tolist()
        loss_v, gnorm = stats[0], stats[1]
        k = len(names)
        comp_vals = {
            "grad_norm": stats[2:2 + k], "weight_norm": stats[2 + k:2 + 2 * k], "update_ratio": stats[2 + 2 * k:2 + 3 * k],
            "act_norm": stats[2 + 3 * k:2 + 4 * k], "dead_fraction": stats[2 + 4 * k:2 + 5 * k],
        }
        if skipped:  # no gradients were computed and nothing was updated: those points are not sent
            gnorm = None
            comp_vals["grad_norm"] = comp_vals["update_ratio"] = [None] * k

        val = None
        if step in plan.evals:
            val = evaluate()
        if step in plan.checkpoints:
            save_state(Path(tmp.name) / f"step{step}.pt", step)

        now = time.perf_counter()
        elapsed = now - wall_prev
        wall_prev = now
        if plan.ext:
            measured.append(elapsed)
            if len(measured) == NOMINAL_STEPS[1]:
                nominal = float(np.median(measured[NOMINAL_STEPS[0] - 1:]))
                plan.params = {**plan.params, "nominal_step_s": round(nominal, 6)}
        elapsed += extra  # the extended set's simulated delays (not slept: see NOMINAL_STEP_S)
        clock += elapsed
        t = "%.3f" % clock
        throughput = bs / elapsed
        w.point(step, "loss", loss_v, t)
        w.point(step, "lr", lr, t)
        w.point(step, "throughput", throughput, t)
        if plan.i20:
            w.point(step, "step_time", elapsed, t)
        if gnorm is not None:
            w.point(step, "grad_norm", gnorm, t)
        silent = plan.component if kind == "telemetry_stop" and step >= plan.start else None
        for metric in COMPONENT_METRICS:
            for name, v in zip(names, comp_vals[metric]):
                if v is not None and name != silent:
                    w.point(step, metric, v, t, name)
        if val is not None:
            w.point(step, "val_loss", val, t)
            val_log.append((step, val))
        if crashed and step <= plan.restart[0] + plan.restart[1]:
            history["replay_loss"][step] = loss_v
        else:
            history["loss"][step] = loss_v
            history["lr"][step] = lr
            history["throughput"][step] = throughput
            history.setdefault("step_time", {})[step] = elapsed
            history["clock"][step] = clock
            history["grad_norm"][step] = gnorm
            history["comp"][step] = comp_vals
            if val is not None:
                history["val_loss"][step] = val

        # ---- loss_shift: the checkpoint at s-1, a crash, the restore; the restored job's pipeline is broken (above)
        if plan.restart_at is not None and step == plan.restart_at - 1:
            state = torch.load(Path(tmp.name) / f"step{step}.pt", weights_only=False)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            data_gen.set_state(state["data_gen"])
            fault_gen.set_state(state["fault_gen"])
            # the optimizer's state is new tensors: the update_surge/grad_ramp references are not used by this kind
            now = time.perf_counter()
            clock += now - wall_prev
            wall_prev = now
        # ---- a benign crash and restart from the checkpoint at c
        if plan.restart is not None and not crashed and step == plan.restart[0] + plan.restart[1]:
            crashed = True
            c = plan.restart[0]
            state = torch.load(Path(tmp.name) / f"step{c}.pt", weights_only=False)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            data_gen.set_state(state["data_gen"])
            fault_gen.set_state(state["fault_gen"])
            shard = state["shard"]
            replay_start = c + 1
            step = c + 1
            now = time.perf_counter()
            clock += now - wall_prev
            wall_prev = now
            continue
        step += 1
    tmp.cleanup()
    if changed_at is not None:
        i = plan.params["run_line_index"]
        first = json.loads(w.lines[i - i % 2000])
        plan.params = {**plan.params, "replay_batch_first_step": first.get("step", changed_at)}
    text = w.text()
    if plan.ext:
        factor = IDLE_STEP_S[plan.family] / nominal
        plan.params = {**plan.params, "measured_nominal_step_s": round(nominal, 6), "time_scale": round(factor, 6),
                       "nominal_step_s": IDLE_STEP_S[plan.family]}
        plan.changed_at = changed_at
        text = rescale_time(text, factor, float(T0 + offset))
        rescale_history(history, factor, float(T0 + offset))
    return text, plan.__dict__ | {"rid": rid}, history


# ----------------------------------------------------------------------------- labels
def _mean(values):
    values = [v for v in values if v == v and abs(v) != math.inf]
    return sum(values) / len(values) if values else float("nan")


def _tp_summary(tp: dict, plan: dict) -> str:
    quiet = [v for i, v in sorted(tp.items()) if i > WARMUP and i not in plan["evals"] and i not in plan["checkpoints"]]
    if not quiet:
        return "-"
    p10, p50, p90 = np.percentile(quiet, [10, 50, 90])
    ratios = [b / a for a, b in zip(quiet, quiet[1:]) if a > 0]
    return (f"median {p50:.0f} samples/s, p10 {p10:.0f}, p90 {p90:.0f}; step-to-step ratio p10 {np.percentile(ratios, 10):.2f}, "
            f"p90 {np.percentile(ratios, 90):.2f}")


def describe(plan: dict, history: dict) -> dict:
    """The label of one run, with what the fault measurably did."""
    kind, seed, s, comp = plan["kind"], plan["seed"], plan["start"], plan["component"]
    names = plan["components"]
    loss = history["loss"]
    gn = history["grad_norm"]
    comps = history["comp"]

    def cm(metric, name, steps):
        return _mean([comps[i][metric][names.index(name)] for i in steps if i in comps])

    events = [{"kind": "warmup", "start_step": 1, "end_step": WARMUP, "replayed_steps": None,
               "note": f"LR rises linearly to {PEAK_LR:g}; loss {loss[1]:.3f} at step 1 -> {loss[WARMUP]:.3f} at step {WARMUP}"}]
    last = plan["last_step"]
    events.append({"kind": "lr_decay", "start_step": WARMUP + 1, "end_step": last, "replayed_steps": None,
                   "note": (f"cosine decay from {PEAK_LR:g} to {MIN_LR:g} at step {STEPS}" if not plan.get("schedule") else
                            "the schedule of the run line's config (see the lr_schedule event)") + "; marked 'steady' in the NDJSON"})
    for e in sorted(plan["evals"]):
        events.append({"kind": "eval", "start_step": e, "end_step": e, "replayed_steps": None,
                       "note": f"val_loss {history['val_loss'].get(e, float('nan')):.4f} on "
                               + (f"{NOISY_EVAL_BATCHES}x{BATCH} held-out windows drawn anew for this eval" if kind == "benign_noisy_eval" else f"{EVAL_BATCHES}x{BATCH} held-out windows")})
    for c in sorted(plan["checkpoints"]):
        tp = history["throughput"]
        base = _mean([tp[i] for i in range(c - 20, c - 1) if i in tp and i not in plan["evals"]])
        events.append({"kind": "checkpoint", "start_step": c, "end_step": c, "replayed_steps": None,
                       "note": f"torch.save of model, optimizer and data-loader state; throughput {tp.get(c, float('nan')):.0f} samples/s at this step vs {base:.0f} typical"})
    if plan["refresh"] is not None:
        r = plan["refresh"]
        events.append({"kind": "data_refresh", "start_step": r, "end_step": r + 9, "replayed_steps": None,
                       "note": f"training switches from text shard A to shard B (other stdlib files) at step {r}; loss mean {_mean([loss[i] for i in range(r - 20, r)]):.3f} over the 20 steps before, {_mean([loss[i] for i in range(r, r + 20)]):.3f} over the 20 from it"})
    if plan["ext"]:
        events.append({"kind": "shared_machine", "start_step": 1, "end_step": last, "replayed_steps": None,
                       "note": f"every step takes a seeded, simulated extra {plan['params'].get('nominal_step_s', 0) * 1000:.1f} ms (its nominal step) x min(Exp(mean {NOISE_MEAN}), {NOISE_CAP:g}) "
                               f"(other jobs on a shared machine); throughput {_tp_summary(history['throughput'], plan)}"})
    for d, f in plan["dips"]:
        tp = history["throughput"]
        events.append({"kind": "throughput_dip", "start_step": d, "end_step": d + DIP_STEPS - 1, "replayed_steps": None,
                       "note": f"each of steps {d}-{d + DIP_STEPS - 1} takes {(f - 1):.2f} nominal steps more (simulated, {f:.2f}x slower): throughput median "
                               f"{float(np.median([tp[i] for i in range(d, d + DIP_STEPS) if i in tp])):.0f} samples/s during, "
                               f"{float(np.median([tp[i] for i in range(d - 30, d) if i in tp])):.0f} over the 30 steps before"})
    if plan["restart"] is not None:
        c, k = plan["restart"]
        again = history["replay_loss"]
        same = all(again[i] == loss[i] for i in range(c + 1, c + k + 1))
        events.append({"kind": "restart", "start_step": c + 1, "end_step": c + 1, "replayed_steps": [c + 1, c + k],
                       "note": f"checkpoint at step {c}; the job ran on to step {c + k}, crashed, reloaded the step-{c} checkpoint "
                               f"(model, optimizer, data-loader RNG) and re-sent steps {c + 1}-{c + k} "
                               f"({'value for value identical training values' if same else 'with different values'}; "
                               f"time and throughput are new measurements); 'restart' phase at {c + 1}, 'steady' at {c + 11}"})

    if plan.get("i20"):
        events.extend(i20_benign_events(plan, history))

    incidents = []
    note = ""
    metrics = list(FAULT_LAYER_METRICS.get(kind, []))
    pre = range(s - 50, s) if s else range(0)
    if kind == "lr_spike":
        e = plan["end"]
        base = _mean([loss[i] for i in pre])
        peak = max(loss[i] for i in range(s, e + 20))
        sd = float(np.std([loss[i] for i in pre]))
        rec = next((i for i in range(e + 1, last - 8) if _mean([loss[j] for j in range(i, i + 10)]) <= base + 3 * sd), None)
        note = (f"LR x{plan['params']['factor']} at steps {s}-{e} ({history['lr'][s]:.4g} vs {scheduled_lr(s):.4g} scheduled); "
                f"loss mean {base:.3f} (sd {sd:.3f}) over the 50 steps before, peak {peak:.3f} by step {e + 19}; "
                f"global grad_norm mean {_mean([gn[i] for i in pre]):.3g} before, max {max(gn[i] for i in range(s, e + 20)):.3g} in {s}-{e + 19}; "
                + (f"the 10-step loss mean is back within 3 sd of the pre-spike mean from step {rec}" if rec else
                   "the loss does not come back within 3 sd of the pre-spike mean before the end of the run"))
        end = e if rec is None or rec <= e + 50 else rec
        if rec is None:
            end = None
        incidents.append(dict(kind=kind, start_step=s, end_step=end, component="", metrics=metrics, note=note))
    elif kind == "nan_weights":
        first_nan_loss = next((i for i in sorted(loss) if i >= s and loss[i] != loss[i]), None)
        note = (f"NaN written into {plan['params']['tensor']} {plan['params'].get('index', plan['params'].get('column'))} "
                f"before the forward pass of step {s}: weight_norm of {comp} NaN from step {s} (finite {cm('weight_norm', comp, [s - 1]):.4g} at {s - 1}), "
                f"act_norm NaN from step {s} in {comp} and every component after it, loss and every grad_norm and update_ratio NaN from step {first_nan_loss}; "
                f"the NaN gradients make every component's weights NaN in that step's update, so every weight_norm is NaN from step {s + 1}; the job is stopped after step {last} (budget {STEPS})")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component=comp, metrics=metrics, note=note))
    elif kind == "component_blowup":
        g0 = cm("grad_norm", comp, pre)
        others = [n for n in names if n != comp]
        first_10x = next((i for i in range(s, last + 1) if comps[i]["grad_norm"][names.index(comp)] > 10 * g0), None)
        other_10x = {n: next((i for i in range(s, last + 1) if comps[i]["grad_norm"][names.index(n)] > 10 * cm("grad_norm", n, pre)), None) for n in others}
        loss_up = next((i for i in range(s, last - 8) if _mean([loss[j] for j in range(i, i + 10)]) > _mean([loss[j] for j in pre]) + 0.1), None)
        note = (f"from step {s} the gradients of {comp} are multiplied by min({BLOWUP_GROWTH}^(step-{s}+1), {BLOWUP_CAP:g}) after backward (an unscaling bug "
                f"feeding on itself): its grad_norm {g0:.3g} (mean of the 50 steps before) -> {comps[s]['grad_norm'][names.index(comp)]:.3g} at {s}, "
                f"{comps[min(s + 20, last)]['grad_norm'][names.index(comp)]:.3g} at {min(s + 20, last)}, >10x from step {first_10x}; "
                f"first step another component's grad_norm exceeds 10x its own baseline: "
                f"{min([v for v in other_10x.values() if v is not None], default='never')}; "
                f"its update_ratio {cm('update_ratio', comp, pre):.3g} before, {cm('update_ratio', comp, range(s + 10, s + 30)):.3g} at {s + 10}-{s + 29}; "
                + (f"the 10-step loss mean first exceeds the pre-fault mean by 0.1 at step {loss_up}" if loss_up is not None else
                   "the loss is unaffected (the 10-step loss mean never exceeds the pre-fault mean by 0.1): Adam normalises the update"))
        if loss_up is not None:
            metrics.append("loss")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component=comp, metrics=metrics, note=note))
    elif kind == "dead_layer":
        note = (f"{plan['params']['how']} in {comp} at step {s}: dead_fraction {cm('dead_fraction', comp, pre):.3f} before -> "
                f"{cm('dead_fraction', comp, range(s, last + 1)):.3f} from {s}; act_norm {cm('act_norm', comp, pre):.3g} -> {cm('act_norm', comp, range(s, last + 1)):.3g}; "
                f"grad_norm {cm('grad_norm', comp, pre):.3g} -> {cm('grad_norm', comp, range(s, last + 1)):.3g}; "
                f"update_ratio {cm('update_ratio', comp, pre):.3g} -> {cm('update_ratio', comp, range(s, last + 1)):.3g}; "
                f"weight_norm {cm('weight_norm', comp, [s - 1]):.4g} at {s - 1} -> {cm('weight_norm', comp, [s]):.4g} at {s}; "
                f"loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, {_mean([loss[i] for i in range(s, s + 20)]):.3f} over the 20 from {s}")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component=comp, metrics=metrics, note=note))
    elif kind == "frozen_layer":
        note = (f"{plan['params']['how']} ({comp}) from step {s} on: its update_ratio {cm('update_ratio', comp, pre):.3g} (mean of the 50 steps before) -> "
                f"{cm('update_ratio', comp, range(s, last + 1)):.3g}; weight_norm constant from {s + 1}; grad_norm {cm('grad_norm', comp, pre):.3g} -> "
                f"{cm('grad_norm', comp, range(s, last + 1)):.3g}; loss {_mean([loss[i] for i in pre]):.3f} before, {_mean([loss[i] for i in range(last - 49, last + 1)]):.3f} over the last 50 steps")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component=comp, metrics=metrics, note=note))
    elif kind == "label_corruption":
        vl = history["val_loss"]
        note = (f"from step {s} {plan['params']['fraction']:.0%} of each batch's targets are permuted among themselves (label noise "
                f"with the character frequencies kept): loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, "
                f"{_mean([loss[i] for i in range(s, s + 10)]):.3f} over the 10 from {s}, {_mean([loss[i] for i in range(last - 49, last + 1)]):.3f} over the last 50; "
                f"val_loss {', '.join(f'{v:.3f}@{e}' for e, v in sorted(vl.items()))}")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component="", metrics=metrics, note=note))
    elif kind == "overfit_divergence":
        vl = history["val_loss"]
        before = [(e, v) for e, v in sorted(vl.items()) if e < s]
        after = [(e, v) for e, v in sorted(vl.items()) if e >= s]
        best = min(after, key=lambda ev: ev[1])
        note = (f"from step {s} every batch is drawn from one fixed set of {OVERFIT_WINDOWS} windows of {SEQ} characters, "
                f"and val_loss is evaluated every {OVERFIT_EVAL_EVERY} steps: training loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, "
                f"{_mean([loss[i] for i in range(last - 49, last + 1)]):.3f} over the last 50; val_loss {before[-1][1]:.3f}@{before[-1][0]} (last eval before), "
                f"then {', '.join(f'{v:.3f}@{e}' for e, v in after)} (lowest {best[1]:.3f}@{best[0]})")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component="", metrics=metrics, note=note))
    elif kind == "dataloader_stall":
        tp = history["throughput"]
        e = plan["end"]
        clean = [i for i in pre if i not in plan["evals"] and i not in plan["checkpoints"]]
        note = (f"each data-loading call sleeps {STALL_SLEEP} s at steps {s}-{e}: throughput median "
                f"{float(np.median([tp[i] for i in clean])):.0f} samples/s over the 50 steps before, "
                f"{float(np.median([tp[i] for i in range(s, e + 1)])):.0f} during, {float(np.median([tp[i] for i in range(e + 1, min(e + 21, last + 1))])):.0f} over the 20 after; "
                f"training values are unaffected")
        incidents.append(dict(kind=kind, start_step=s, end_step=e, component="", metrics=metrics, note=note))
    elif kind == "stall_noisy":
        tp = history["throughput"]
        e = plan["end"]
        clean = [i for i in pre if i not in plan["evals"] and i not in plan["checkpoints"]]
        before = float(np.median([tp[i] for i in clean]))
        during = float(np.median([tp[i] for i in range(s, e + 1)]))
        note = (f"each data-loading call takes {(EXT_STALL_FACTOR - 1) * plan['params']['nominal_step_s'] * 1000:.0f} ms more at steps {s}-{e} "
                f"({EXT_STALL_FACTOR - 1} nominal steps of this run, simulated): throughput median {before:.0f} samples/s over the 50 steps before, "
                f"{during:.0f} during ({before / during:.0f}x lower), {float(np.median([tp[i] for i in range(e + 1, min(e + 21, last + 1))])):.0f} over the 20 after; "
                f"the stall lasts {history['clock'][e] - history['clock'][s - 1]:.1f} s of wall time; the rest of the run: {_tp_summary(tp, plan)}; training values are unaffected")
        incidents.append(dict(kind=kind, start_step=s, end_step=e, component="", metrics=metrics, note=note))
    elif kind == "weight_jump":
        i = names.index(comp)
        after = range(s, min(s + 10, last + 1))
        jumps = {n: max(comps[j]["grad_norm"][names.index(n)] for j in after) / cm("grad_norm", n, pre) for n in names}
        note = (f"before the forward pass of step {s} (outside the optimizer) {', '.join(plan['params']['tensors'])} multiplied by {WEIGHT_JUMP:g}: "
                f"weight_norm of {comp} {comps[s - 1]['weight_norm'][i]:.4g} at {s - 1} -> {comps[s]['weight_norm'][i]:.4g} at {s} "
                f"(other components' weight_norm within {max(abs(comps[s]['weight_norm'][j] / comps[s - 1]['weight_norm'][j] - 1) for j in range(len(names)) if j != i):.1%}); "
                f"act_norm of {comp} {cm('act_norm', comp, pre):.3g} before -> {comps[s]['act_norm'][i]:.3g} at {s}; "
                f"max grad_norm over {s}-{after[-1]} / its mean over the 50 steps before: "
                + ", ".join(f"{n} {v:.3g}x" for n, v in jumps.items())
                + f"; loss mean {_mean([loss[j] for j in pre]):.3f} before, {loss[s]:.3f} at {s}, peak {max(loss[j] for j in range(s, min(s + 20, last + 1))):.3f} by {min(s + 19, last)}, "
                f"{_mean([loss[j] for j in range(last - 49, last + 1)]):.3f} over the last 50 steps")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component=comp, metrics=metrics, note=note))
    elif kind == "nan_weight":
        i = names.index(comp)
        nan_at_s = [n for n in names if comps[s]["weight_norm"][names.index(n)] != comps[s]["weight_norm"][names.index(n)]]
        act_nan = [n for n in names if comps[s]["act_norm"][names.index(n)] != comps[s]["act_norm"][names.index(n)]]
        note = (f"one NaN written into {plan['params']['tensor']}{plan['params']['index']} before the forward pass of step {s}: at {s} weight_norm NaN in "
                f"{', '.join(nan_at_s)} only (finite {comps[s - 1]['weight_norm'][i]:.4g} at {s - 1}), act_norm NaN in {', '.join(act_nan) or 'none'}, "
                f"loss {loss[s]}; from {s + 1} the NaN gradients have made every component's weights NaN; the job is stopped after step {last}")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component=comp, metrics=metrics, note=note))
    elif kind == "label_onset":
        vl = history["val_loss"]
        note = (f"from step {s} {plan['params']['fraction']:.0%} of each batch's targets are permuted among themselves: loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, "
                f"{loss[s]:.3f} at {s}, {_mean([loss[i] for i in range(s, s + 10)]):.3f} over the 10 from {s}; global grad_norm {_mean([gn[i] for i in pre]):.3g} before, "
                f"{gn[s]:.3g} at {s}; per component grad_norm at {s} / mean before: "
                + ", ".join(f"{n} {comps[s]['grad_norm'][names.index(n)] / cm('grad_norm', n, pre):.2g}x" for n in names)
                + f"; val_loss {', '.join(f'{v:.3f}@{e}' for e, v in sorted(vl.items()))}")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component="", metrics=metrics, note=note))
    elif kind == "nan_loss_recover":
        note = (f"at step {s} sample {plan['params']['sample']} of the batch has a NaN loss weight: loss NaN at {s}; the guard skipped backward and the update "
                f"(no grad_norm or update_ratio points at {s}); loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, "
                f"{_mean([loss[i] for i in range(s + 1, s + 21)]):.3f} over the 20 after, every value after {s} finite")
        incidents.append(dict(kind=kind, start_step=s, end_step=s, component="", metrics=metrics, note=note))
    elif kind == "val_divergence":
        vl = history["val_loss"]
        before = [(e, v) for e, v in sorted(vl.items()) if e < s]
        after = [(e, v) for e, v in sorted(vl.items()) if e >= s]
        note = (f"from step {s} every batch is drawn from one fixed set of {OVERFIT_WINDOWS} windows; val_loss every {EVAL_EVERY} steps (first after the onset at "
                f"{plan['params']['first_eval_step']}): training loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, "
                f"{_mean([loss[i] for i in range(last - 49, last + 1)]):.3f} over the last 50; val_loss "
                f"{', '.join(f'{v:.3f}@{e}' for e, v in before[-2:])} before, then {', '.join(f'{v:.3f}@{e}' for e, v in after)}")
        incidents.append(dict(kind=kind, start_step=s, end_step=None, component="", metrics=metrics, note=note))

    if kind in I20_FAULT_KINDS:
        incidents.append(i20_incident(plan, history))

    for inc in incidents:
        # Every label says its origin (the faulty component, "" = run-level), its window and its model family.
        inc["origin"] = inc["component"]
        inc["window"] = [inc["start_step"], inc["end_step"] if inc["end_step"] is not None else last]

    if incidents:
        incidents[0]["params"] = {"injected_steps": [s, plan["end"] if plan["end"] is not None else last], **plan["params"]}
    if incidents:
        inc = incidents[0]
        where = f" of component {inc['component']}" if inc["component"] else ""
        span = f"steps {inc['start_step']}-{inc['end_step']}" if inc["end_step"] is not None else f"step {inc['start_step']} to the end"
        expectation = (f"An alert on {'/'.join(inc['metrics'])}{where} at or soon after step {inc['start_step']} ({kind}, {span}), "
                       f"naming {inc['component'] or 'the run'}; none before it: not during warmup (1-{WARMUP}), nor at the evals, checkpoints "
                       f"or the LR decay.")
    elif plan.get("i20"):
        expectation = (f"No alert anywhere in the run: warmup (1-{WARMUP}), the LR schedule, evals every {plan['eval_every']} steps, checkpoints at "
                       f"{', '.join(str(x) for x in sorted(plan['checkpoints']))} and the shared machine's throughput noise are normal; so is "
                       + {"benign_noisy_eval": lambda: "a tiny, freshly drawn evaluation set whose val_loss moves by several % from one eval to the next and drifts up mildly late in training.",
                          "benign_amp": lambda: "a loss scaler skipping the updates of the overflow steps " + ", ".join(str(x) for x in sorted(plan["amp_skips"])) + " (non-finite grad_norm there, by design).",
                          "benign_batch_change": lambda: f"the announced batch change (a new run line at step {plan['changed_at']}: batch {BATCH} -> {2 * BATCH}, LR x2) and the slower steps after it.",
                          "benign_lr_schedules": lambda: "the LR schedule's own shape (" + ("step decay" if (plan["schedule"] or ("",))[0] == "step" else "warm restarts") + ").",
                          "benign_slow_ckpt": lambda: f"a {SLOW_CKPT_S:g}-second checkpoint at step {plan['slow_ckpt']} and a loaded machine (noisier step times) at steps "
                                              f"{plan['loaded'][0]}-{plan['loaded'][0] + LOADED_STEPS - 1}."}[kind]())
    else:
        c, k = plan["restart"]
        expectation = (f"No alert anywhere in the run: warmup (1-{WARMUP}), the cosine LR decay, evals every {EVAL_EVERY} steps, checkpoints at "
                       f"{', '.join(str(x) for x in sorted(plan['checkpoints']))} (throughput dips), the data refresh at {plan['refresh']} and the "
                       f"restart at {c + 1} with steps {c + 1}-{c + k} replayed are all normal"
                       + (f"; so are the shared machine's throughput noise and the {len(plan['dips'])} short dips at "
                          f"{', '.join(f'{d}-{d + DIP_STEPS - 1} ({f:.1f}x)' for d, f in plan['dips'])}." if plan["ext"] else "."))
    return {"incidents": incidents, "benign_events": events, "expectation": expectation}


def _med(series: dict, steps) -> float:
    values = [series[i] for i in steps if i in series and series[i] == series[i]]
    return float(np.median(values)) if values else float("nan")


def i20_benign_events(plan: dict, history: dict) -> list[dict]:
    """The issue-20 set's benign events, with what they measurably did."""
    kind, last = plan["kind"], plan["last_step"]
    loss, st, tp, vl = history["loss"], history["step_time"], history["throughput"], history["val_loss"]
    events = []
    if kind == "benign_noisy_eval":
        vals = sorted(vl.items())
        jumps = [abs(b / a - 1) for (_, a), (_, b) in zip(vals, vals[1:])]
        best = min(vals[len(vals) // 3:], key=lambda ev: ev[1])
        events.append({"kind": "noisy_eval", "start_step": plan["eval_every"], "end_step": last, "replayed_steps": None,
                       "note": f"val_loss on {NOISY_EVAL_BATCHES}x{BATCH} validation windows drawn anew at each eval (every {plan['eval_every']} steps), "
                               f"training on the first {plan['train_chars']:,} characters of shard A: val_loss {', '.join(f'{v:.3f}@{e}' for e, v in vals)}; "
                               f"change from one eval to the next median {np.median(jumps):.1%}, max {max(jumps):.1%}; lowest {best[1]:.3f}@{best[0]} after the first third, "
                               f"mean of the last three {_mean([v for _, v in vals[-3:]]):.3f}; training loss {_mean([loss[i] for i in range(last - 49, last + 1)]):.3f} over the last 50 steps"})
    elif kind == "benign_amp":
        skips = sorted(plan["amp_skips"])
        groups = []
        for x in skips:
            if groups and x == groups[-1][1] + 1:
                groups[-1][1] = x
            else:
                groups.append([x, x])
        for a, b in groups:
            gn = history["grad_norm"]
            events.append({"kind": "amp_overflow", "start_step": a, "end_step": b, "replayed_steps": None,
                           "note": f"loss scaler overflow at step{'s' if b > a else ''} {a}{f'-{b}' if b > a else ''}: the scaled loss's gradients are non-finite "
                                   f"(global grad_norm {', '.join(str(gn[i]) for i in range(a, b + 1))}), the update is skipped (update_ratio 0 on every component); "
                                   f"loss {loss[a]:.3f} at {a}" + (f", {_mean([loss[i] for i in range(b + 1, min(b + 21, last + 1))]):.3f} over the 20 steps after" if b < last else "")})
    elif kind == "benign_batch_change":
        b = plan["changed_at"]
        events.append({"kind": "batch_change", "start_step": b, "end_step": last, "replayed_steps": None,
                       "note": f"at step {b} the job doubles its batch ({BATCH} -> {2 * BATCH}) and its LR (x2) and sends a new run line whose config says so "
                               f"(same run id; with run.py's 2,000-line batches the line arrives in the batch whose first step is {plan['params']['replay_batch_first_step']}): "
                               f"step_time median {_med(st, range(b - 50, b)) * 1000:.2f} ms over the 50 steps before, {_med(st, range(b, b + 50)) * 1000:.2f} ms over the 50 from it "
                               f"({_med(st, range(b, b + 50)) / _med(st, range(b - 50, b)):.2f}x); throughput {_med(tp, range(b - 50, b)):.0f} -> {_med(tp, range(b, b + 50)):.0f} samples/s; "
                               f"loss {_mean([loss[i] for i in range(b - 30, b)]):.3f} over the 30 steps before, {_mean([loss[i] for i in range(b, b + 30)]):.3f} over the 30 from it"})
    elif kind == "benign_lr_schedules":
        sch = plan["schedule"]
        if sch[0] == "step":
            marks = [sch[1], sch[2]]
            what = f"step decay: LR {PEAK_LR:g} x0.1 from step {sch[1]} and x0.01 from step {sch[2]}"
        else:
            marks = list(range(WARMUP + 1 + sch[1], last + 1, sch[1]))
            what = f"SGDR: cosine from {PEAK_LR:g} to {MIN_LR:g} over {sch[1]} steps, restarted at {PEAK_LR:g} at steps {', '.join(str(m) for m in marks)}"
        events.append({"kind": "lr_schedule", "start_step": WARMUP + 1, "end_step": last, "replayed_steps": None,
                       "note": what + "; loss mean over the 20 steps before / after each change: "
                               + ", ".join(f"{m}: {_mean([loss[i] for i in range(m - 20, m)]):.3f} / {_mean([loss[i] for i in range(m, m + 20)]):.3f}" for m in marks)})
    elif kind == "benign_slow_ckpt":
        c, (a, f) = plan["slow_ckpt"], plan["loaded"]
        events.append({"kind": "slow_checkpoint", "start_step": c, "end_step": c, "replayed_steps": None,
                       "note": f"the checkpoint at step {c} takes {st[c]:.2f} s of `time` (simulated slow storage); step_time median {_med(st, range(c - 50, c)) * 1000:.2f} ms around it; "
                               f"throughput {tp[c]:.1f} samples/s at that step"})
        sd_in = float(np.std([st[i] for i in range(a, a + LOADED_STEPS)]))
        sd_out = float(np.std([st[i] for i in range(WARMUP + 1, last + 1) if not a - 10 <= i < a + LOADED_STEPS + 10 and i not in plan["evals"] and i not in plan["checkpoints"]]))
        events.append({"kind": "loaded_machine", "start_step": a, "end_step": a + LOADED_STEPS - 1, "replayed_steps": None,
                       "note": f"steps {a}-{a + LOADED_STEPS - 1}: the shared machine's simulated delay x{f}: step_time sd {sd_in * 1000:.2f} ms during vs {sd_out * 1000:.2f} ms elsewhere, "
                               f"median {_med(st, range(a, a + LOADED_STEPS)) * 1000:.2f} ms vs {_med(st, range(WARMUP + 1, a)) * 1000:.2f} ms before"})
    return events


def i20_incident(plan: dict, history: dict) -> dict:
    """The incident of an issue-20 fault run, with what the fault measurably did."""
    kind, s, comp, names = plan["kind"], plan["start"], plan["component"], plan["components"]
    last = plan["last_step"]
    loss, st, tp, vl, gn, comps = (history[k] for k in ("loss", "step_time", "throughput", "val_loss", "grad_norm", "comp"))
    pre = range(s - 50, s)
    tail = range(last - 49, last + 1)
    end = None
    metrics = list(FAULT_LAYER_METRICS[kind])

    def cm(metric, name, steps):
        return _mean([comps[i][metric][names.index(name)] for i in steps if i in comps])

    def at(metric, name, step):
        return comps[step][metric][names.index(name)]

    vals = ", ".join(f"{v:.3f}@{e}" for e, v in sorted(vl.items()))
    if kind == "loss_shift":
        base = _mean([loss[i] for i in pre])
        note = (f"checkpoint at step {s - 1}, crash and restore ('restart' phase at {s}, 'steady' at {s + 10}); the restored job's data loader decodes with a broken "
                f"character table: {plan['params']['corrupt_fraction']:.1%} of the characters it yields (inputs and targets) are random symbols, for good. Training loss "
                f"{base:.3f} over the 50 steps before, {_mean([loss[i] for i in range(s, s + 20)]):.3f} over the 20 from {s}, {_mean([loss[i] for i in tail]):.3f} over the last 50 "
                f"({_mean([loss[i] for i in tail]) / base - 1:+.0%}; the 20-step mean never comes back below {min(_mean([loss[j] for j in range(i, i + 20)]) for i in range(s, last - 18)):.3f}); "
                f"val_loss (clean validation text) {vals}")
    elif kind == "throughput_drop":
        note = (f"from step {s} to the end each step takes {DROP_FACTOR - 1} nominal steps more (a data loader on a slow disk, simulated): step_time median "
                f"{_med(st, pre) * 1000:.2f} ms over the 50 steps before, {_med(st, range(s, last + 1)) * 1000:.2f} ms from {s} ({_med(st, range(s, last + 1)) / _med(st, pre):.1f}x); "
                f"throughput median {_med(tp, pre):.0f} -> {_med(tp, range(s, last + 1)):.0f} samples/s; training values are unaffected")
    elif kind == "update_surge":
        others = [n for n in names if n != comp]
        after = range(s, min(s + 11, last + 1))
        note = (f"before the optimizer step of step {s} the Adam second moment (exp_avg_sq) of every parameter of {comp} is multiplied by {SURGE_SCALE:g} (a corrupted optimizer state): "
                f"its update_ratio {cm('update_ratio', comp, pre):.3g} (mean of the 50 steps before) -> {at('update_ratio', comp, s):.3g} at {s} "
                f"({at('update_ratio', comp, s) / cm('update_ratio', comp, pre):.0f}x), {at('update_ratio', comp, s + 1):.3g} at {s + 1}, {at('update_ratio', comp, s + 5):.3g} at {s + 5}, "
                f"{at('update_ratio', comp, s + 20):.3g} at {s + 20}; its weight_norm {at('weight_norm', comp, s):.4g} at {s} -> {at('weight_norm', comp, s + 1):.4g} at {s + 1}, "
                f"{at('weight_norm', comp, min(s + 50, last)):.4g} at {min(s + 50, last)} ({at('weight_norm', comp, min(s + 50, last)) / at('weight_norm', comp, s) - 1:+.0%}); "
                f"its grad_norm {cm('grad_norm', comp, pre):.3g} before, {at('grad_norm', comp, s):.3g} at {s}, max {max(at('grad_norm', comp, i) for i in after):.3g} in {s}-{after[-1]}; "
                f"other components' update_ratio at {s}: " + ", ".join(f"{n} {at('update_ratio', n, s) / cm('update_ratio', n, pre):.2g}x" for n in others)
                + f"; loss {_mean([loss[i] for i in pre]):.3f} before, peak {max(loss[i] for i in range(s, min(s + 30, last + 1))):.3f} in {s}-{min(s + 29, last)}, "
                f"{_mean([loss[i] for i in tail]):.3f} over the last 50")
    elif kind == "grad_ramp":
        g0 = cm("grad_norm", comp, pre)
        first8 = next((i for i in range(s, last + 1) if at("grad_norm", comp, i) > 8 * g0), None)
        others = [n for n in names if n != comp]
        note = (f"from step {s} the gradients of {comp} are not zeroed between steps (a gradient-accumulation bug: each step's gradient adds to the sum since {s - 1}): "
                f"its grad_norm {g0:.3g} (mean of the 50 steps before) -> {at('grad_norm', comp, s):.3g} at {s}, {at('grad_norm', comp, s + 10):.3g} at {s + 10}, "
                f"{at('grad_norm', comp, min(s + 50, last)):.3g} at {min(s + 50, last)} ({at('grad_norm', comp, min(s + 50, last)) / g0:.1f}x), "
                f"{at('grad_norm', comp, last):.3g} at {last} ({at('grad_norm', comp, last) / g0:.1f}x); " + (f">8x from step {first8}; " if first8 else "never 8x; ")
                + f"its update_ratio {cm('update_ratio', comp, pre):.3g} before, {cm('update_ratio', comp, range(s + 10, s + 50)):.3g} over {s + 10}-{s + 49}; "
                f"its weight_norm {at('weight_norm', comp, s):.4g} at {s} -> {at('weight_norm', comp, last):.4g} at {last}; "
                f"other components' grad_norm at {min(s + 50, last)} / their mean before: " + ", ".join(f"{n} {at('grad_norm', n, min(s + 50, last)) / cm('grad_norm', n, pre):.2g}x" for n in others)
                + f"; loss {_mean([loss[i] for i in pre]):.3f} before, {_mean([loss[i] for i in tail]):.3f} over the last 50")
    elif kind == "step_drift":
        b = _med(st, pre)
        rolling = {i: _med(st, range(i - 4, i + 6)) for i in range(s, last - 4)}
        x2 = next((i for i, v in rolling.items() if v >= 2 * b), None)
        note = (f"from step {s} each step's simulated delay grows by x{plan['params']['growth_per_step']} a step (to {plan['params']['end_factor']} nominal steps more at {last}; "
                f"a compounding slowdown): step_time median {b * 1000:.2f} ms over the 50 steps before, {_med(st, range(s + 45, s + 55)) * 1000:.2f} ms around {s + 50}, "
                f"{_med(st, range(s + 95, s + 105)) * 1000:.2f} ms around {s + 100}, {_med(st, range(s + 145, s + 155)) * 1000:.2f} ms around {s + 150}, "
                f"{_med(st, range(last - 19, last + 1)) * 1000:.2f} ms over the last 20 ({_med(st, range(last - 19, last + 1)) / b:.1f}x); the 10-step median first reaches 2x at "
                f"{x2 if x2 else 'never'}" + (f" ({x2 - s} steps after the start)" if x2 else "") + f"; throughput median {_med(tp, pre):.0f} -> {_med(tp, range(last - 19, last + 1)):.0f} samples/s; training values are unaffected")
    elif kind == "grad_collapse":
        note = (f"from step {s} the gradients of {comp} are multiplied by {COLLAPSE_SCALE:g} after backward (a broken gradient-scaling hook): its grad_norm "
                f"{cm('grad_norm', comp, pre):.3g} (mean of the 50 steps before) -> {at('grad_norm', comp, s):.3g} at {s}, min {min(at('grad_norm', comp, i) for i in range(s, last + 1)):.3g} from {s}; "
                f"its update_ratio {cm('update_ratio', comp, pre):.3g} before, {at('update_ratio', comp, s + 10):.3g} at {s + 10}, {at('update_ratio', comp, min(s + 50, last)):.3g} at {min(s + 50, last)}, "
                f"{cm('update_ratio', comp, tail):.3g} over the last 50 (weight decay alone: about lr x {WEIGHT_DECAY:g} x the share of the weights in decayed matrices, "
                f"{history['lr'][last] * WEIGHT_DECAY:.2g} at {last}) as Adam's second moment decays with beta2; its weight_norm {at('weight_norm', comp, s):.4g} at {s} -> {at('weight_norm', comp, last):.4g} at {last}; "
                f"global grad_norm {_mean([gn[i] for i in pre]):.3g} before, {_mean([gn[i] for i in range(s, last + 1)]):.3g} after; loss {_mean([loss[i] for i in pre]):.3f} before, {_mean([loss[i] for i in tail]):.3f} over the last 50")
    elif kind == "telemetry_stop":
        note = (f"from step {s} no point of {comp} (grad_norm, weight_norm, update_ratio, act_norm, dead_fraction) is sent; its last points are at step {s - 1}; "
                f"every other series (run-level and the other components') goes on to step {last}; training is unchanged "
                f"(loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, {_mean([loss[i] for i in tail]):.3f} over the last 50)")
    elif kind == "lr_collapse":
        note = (f"from step {s} every parameter group's LR is {plan['params']['lr']:g} and `lr` says so ({history['lr'][s - 1]:.4g} at {s - 1}): update_ratio per component, mean of the 50 steps before -> from {s}: "
                + ", ".join(f"{n} {cm('update_ratio', n, pre):.3g} -> {cm('update_ratio', n, range(s, last + 1)):.3g}" for n in names)
                + f"; weight_norm constant; loss {_mean([loss[i] for i in pre]):.3f} before, {_mean([loss[i] for i in tail]):.3f} over the last 50; val_loss {vals}")
    elif kind == "data_repeat":
        fall = next((i for i in range(s, last - 8) if _mean([loss[j] for j in range(i, i + 10)]) < _mean([loss[j] for j in pre]) - 0.2), None)
        note = (f"from step {s} the data loader repeats a cycle of {REPEAT_BATCHES} batches: training loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, "
                f"{_mean([loss[i] for i in range(s, s + 20)]):.3f} over {s}-{s + 19}, {_mean([loss[i] for i in range(s + 20, s + 70)]):.3f} over {s + 20}-{s + 69}, "
                f"{_mean([loss[i] for i in tail]):.3f} over the last 50; the 10-step mean first falls 0.2 below the mean before at {fall}; val_loss {vals}")
    elif kind == "amp_skip":
        nonfinite = sum(1 for i in range(s, last + 1) if not (gn[i] == gn[i] and abs(gn[i]) != math.inf))
        note = (f"from step {s} the loss is multiplied by inf before backward at every step (a loss scale gone to inf): every gradient is non-finite "
                f"(global grad_norm {gn[s]} at {s}; non-finite at {nonfinite} of the {last - s + 1} steps from {s}; every component's too) and the scaler skips every update: "
                f"update_ratio 0 on every component, weight_norm constant from {s}; loss {_mean([loss[i] for i in pre]):.3f} over the 50 steps before, "
                f"{_mean([loss[i] for i in tail]):.3f} over the last 50 (training has stalled); val_loss {vals}")
    else:
        raise ValueError(kind)
    return dict(kind=kind, start_step=s, end_step=end, component=comp, metrics=metrics, note=note)


def normalise_label(label: dict):
    """Labels written before the extended set: add the family, and each incident's origin and window."""
    label.setdefault("family", "transformer")
    decay = [e for e in label.get("benign_events", []) if e["kind"] == "lr_decay"]
    last = decay[0]["end_step"] if decay else STEPS
    for inc in label.get("incidents", []):
        inc.setdefault("origin", inc.get("component", ""))
        inc.setdefault("window", [inc["start_step"], inc["end_step"] if inc["end_step"] is not None else last])


# ----------------------------------------------------------------------------- main
def rescale_time(text: str, factor: float, t0: float) -> str:
    """Every `time` t of a run's NDJSON becomes t0 + factor x (t - t0) (written to 0.1 ms: a step of
    a fast model is about 1 ms) and every `throughput` value
    v becomes v / factor (the same steps, each `factor` times as long); other lines and values are
    left byte for byte."""
    out = []
    for line in text.splitlines():
        if '"time":' not in line:
            out.append(line)
            continue
        obj = json.loads(line)
        obj["time"] = t0 + factor * (obj["time"] - t0)
        if obj.get("metric") == "throughput":
            obj["value"] = float(num(obj["value"] / factor))
        if obj.get("metric") == "step_time":
            obj["value"] = float(num(obj["value"] * factor))
        if obj.get("type") == "point":
            # The generator's own layout (key order, 7 significant digits, %.3f times).
            comp = '' if "component" not in obj else ',"component":"%s"' % obj["component"]
            value = obj["value"] if isinstance(obj["value"], str) else None
            out.append('{"type":"point","run":"%s","step":%d,"metric":"%s"%s,"value":%s,"time":%.4f}' % (
                obj["run"], obj["step"], obj["metric"], comp, '"%s"' % value if value else num(obj["value"]), obj["time"]))
        else:
            out.append('{"type":"phase","run":"%s","step":%d,"phase":"%s","time":%.4f}' % (obj["run"], obj["step"], obj["phase"], obj["time"]))
    return "\n".join(out) + "\n"


def rescale_history(history: dict, factor: float, t0: float):
    history["throughput"] = {k: v / factor for k, v in history["throughput"].items()}
    history["step_time"] = {k: v * factor for k, v in history.get("step_time", {}).items()}
    history["clock"] = {k: t0 + factor * (v - t0) for k, v in history["clock"].items()}


def write_gz(path: Path, text: str):
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
            gz.write(text.encode())
    tmp.replace(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default benchmarks/faults/corpus)")
    ap.add_argument("--only", nargs="+", choices=KINDS, help="only these kinds")
    ap.add_argument("--seeds", nargs="+", type=int,
                    help="only these seeds (default: 0-3 for the original faults, 0-7 for benign, every seed of EXT_RUNS for the extended kinds)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="DIR",
                    help="generate nothing: move the runs of these output folders (made with --out, e.g. in parallel) into --out and merge their labels")
    ap.add_argument("--set", choices=("original", "extended", "issue20", "all"), default="all", dest="which",
                    help="without --only: the original 40 runs, the extended set (issue 11), the issue-20 set, or all three (default)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)

    jobs = []
    default_kinds = {"original": FAULT_KINDS + ["benign"], "extended": EXT_FAULT_KINDS + ["benign_noisy"], "issue20": I20_KINDS, "all": KINDS}[args.which]
    for kind in args.only or default_kinds:
        seeds = args.seeds if args.seeds is not None else (
            ext_seeds(kind) if kind in EXT_RUNS else range(8) if kind == "benign" else range(4))
        jobs.extend((kind, seed) for seed in seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    labels_path = args.out / "labels.json"
    labels = json.loads(labels_path.read_text()) if labels_path.exists() else {}
    runs = labels.get("runs", {})

    if args.merge:
        jobs = []
        for folder in args.merge:
            for rid, label in json.loads((folder / "labels.json").read_text())["runs"].items():
                (folder / label["file"]).replace(args.out / label["file"])
                runs[rid] = label
    corpus = Corpus()
    started = time.perf_counter()
    for kind, seed in jobs:
        t = time.perf_counter()
        offset = KINDS.index(kind) * 1_000_000 + seed * 20_000
        text, plan, history = generate_run(kind, seed, corpus, offset)
        rid = plan["rid"]
        path = args.out / f"{rid}.ndjson.gz"
        write_gz(path, text)
        label = {"file": path.name, "split": split_of(kind, seed), "kind": kind, "seed": seed, "family": plan["family"]}
        label.update(describe(plan, history))
        runs[rid] = label
        inc = label["incidents"][0] if label["incidents"] else None
        print(f"{rid:34s} {time.perf_counter() - t:5.1f}s {path.stat().st_size / 1024:7.0f} KiB  "
              + (f"start {inc['start_step']} end {inc['end_step']} {inc['component'] or '(run)'}" if inc else
                 f"restart {plan['restart']} refresh {plan['refresh']}"), flush=True)

    for label in runs.values():
        normalise_label(label)
    order = {run_id(k, s): (KINDS.index(k), s) for k in KINDS for s in range(100)}
    document = {
        "version": 1,
        "generated_by": "benchmarks/faults/generate.py",
        "contract": "shared/spec/ingest-v1.md (NDJSON)",
        "conventions": {
            "start_step/end_step": "inclusive training steps as they appear in the point lines; end_step null = did not end (not recovered) within the run",
            "replayed_steps": "[first, last] steps that were already sent once and are sent again after a restart, or null",
            "component": "the faulty component, as named in the point lines; \"\" = a run-level fault",
            "metrics": "the metrics in which the fault shows (of the component when one is named, else run-level)",
            "split": "original kinds: tune = fault seeds 0-1 and benign seeds 0-3; extended kinds (EXT_RUNS): tune = the lower half of each kind's seeds (issue-20 kinds: s0-s1; benign_noisy_eval: seeds 0, 1, 4, 5); heldout = the rest",
            "origin": "the component where the fault starts (= component); \"\" = run-level (data, schedule, the job)",
            "window": "[start_step, end_step, or the run's last step when the fault does not end]",
            "family": "the model family: transformer, mlp, cnn or gru",
            "step_time": "issue-20 runs only: a run-level point, the seconds of the step (the duration throughput divides by)",
        },
        "corpus": {
            "data": f"CPython {corpus.python} standard library .py files under {corpus.root} ({corpus.files} files after exclusions, sha256 {corpus.sha256}), PSF License",
            "torch": torch.__version__,
            "steps": STEPS,
            "components": COMPONENTS,
            "components_by_family": {f: v[1] for f, v in FAMILIES.items()},
        },
        "runs": dict(sorted(runs.items(), key=lambda kv: order.get(kv[0], (99, 0)))),
    }
    labels_path.write_text(json.dumps(document, indent=1) + "\n")
    print(f"{len(jobs)} runs in {time.perf_counter() - started:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
