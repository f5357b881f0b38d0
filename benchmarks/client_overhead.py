#!/usr/bin/env python
"""Client overhead: step time of a small transformer on CPU with and without the warninglight client.

    .venv/bin/pip install -e '.[faults]' -e ./client     # torch==2.13.0 (CPU) and the client
    .venv/bin/python benchmarks/client_overhead.py                    # live local console (default)
    .venv/bin/python benchmarks/client_overhead.py --sink spool       # console down: closed port, spooling
    .venv/bin/python benchmarks/client_overhead.py --rounds 4 --block 20 --threads 1

One process, one run of this script gives every figure. The model: a pre-LN character transformer,
4 blocks, d_model 128, 4 heads, MLP 512, vocabulary 256, sequence 64, batch 16, AdamW, on CPU with
`torch.set_num_threads(--threads)` (default 1: the machine's other core is left to the client's sender
thread and the console). Four configurations, each training its own copy of the model (same
initialisation, same batches):

  baseline      no client at all
  log-only      `wl.log(step, loss=loss, lr=lr)` every step (a 0-d tensor and a float)
  health/10     the same plus `model=`, `optimizer=` (per-component health every 10 steps)
  health/1      the same with `health_every=1`
  baseline-b    a second copy of the baseline: its ratio to the baseline is the A/A noise floor of
                this machine and method (two identical configurations that differ only in their
                tensors' addresses and their place in the rotation)

After a warm-up of every configuration, the configurations run in interleaved blocks of --block
steps, --rounds times, in a rotating order, so that drift of the machine (other load, thermal, the
console's database growing) falls on all of them alike. Every step is timed on its own (wall clock,
from fetching the batch to after `wl.log`); after each block the client's queue is flushed, untimed,
so one configuration's sending never falls into another's block. Printed per configuration: the median
step time and its ratio to the baseline's, and the block mean: the median over the rounds of each
block's mean step time, and its ratio. The targets (log-only <= 1.01, health/10 <= 1.03, health/1 <=
1.10) are judged on the block mean: with health every 10 steps nine steps in ten do no health work at
all, so the median step would hide it, and a once-per-second send that costs one step a few ms shows
in a mean, not in a median; the median over rounds keeps one disturbed block from deciding.

--sink console (default) starts a real console in a temporary folder as benchmarks/faults/run.py does
(new SQLite database, `manage.py migrate`, `issue_token` with the starter pack, `uvicorn` in its own
process, eager evaluation) and the client sends to it over HTTP: the sender thread's encoding and
requests compete with the training thread for the GIL, and the console's evaluation runs on the
same machine. --sink spool points the client at a closed port with `spool_dir` in a temporary folder
(the console-down path: batches are encoded and appended to the spool file).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "client"))  # the client from this checkout when it is not installed

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import warninglight  # noqa: E402

VOCAB, SEQ, BATCH, D, HEADS, HIDDEN, LAYERS = 256, 64, 16, 128, 4, 512, 4
TARGETS = {"log-only": 1.01, "health/10": 1.03, "health/1": 1.10}
CONFIGS = ["baseline", "log-only", "health/10", "health/1", "baseline-b"]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, HIDDEN)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(HIDDEN, D)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class Config:
    def __init__(self, name, data, sink):
        self.name = name
        torch.manual_seed(0)
        self.model = Model()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.1)
        self.data = data
        self.step = 0
        self.times = []
        self.blocks = []  # mean step time of each timed block
        self.wl = None
        if not name.startswith("baseline"):
            options = dict(sink, run_id=f"overhead-{name.replace('/', '-')}-{os.getpid()}", code_rev=False)
            if name.startswith("health"):
                options.update(model=self.model, optimizer=self.opt, health_every=int(name.split("/")[1]))
            self.wl = warninglight.watch(**options)

    def run(self, steps, record=True):
        model, opt, wl, data = self.model, self.opt, self.wl, self.data
        clock = time.perf_counter
        first = len(self.times)
        for _ in range(steps):
            t0 = clock()
            self.step += 1
            x, y = data[self.step % len(data)]
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if wl is not None:
                wl.log(self.step, loss=loss.detach(), lr=1e-3)
            if record:
                self.times.append(clock() - t0)
        if record:
            self.blocks.append(statistics.fmean(self.times[first:]))
        if wl is not None:
            wl.flush(30)


def start_console(tmp: Path):
    sys.path.insert(0, str(HERE / "faults"))
    import run as faults  # noqa: E402  (its console helpers: service_env, manage, Server)

    env = faults.service_env(f"sqlite:///{tmp / 'overhead.sqlite3'}", tmp / "var")
    faults.manage(env, "migrate", "--noinput")
    token = faults.manage(env, "issue_token", "overhead", "--owner", "Bench On-call <oncall@example.org>").strip().splitlines()[-1]
    server = faults.Server(env, tmp / "uvicorn.log", 1)
    server.wait_ready()
    return server, token.strip()


def code_version() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return rev + ("+uncommitted" if dirty else "")
    except Exception:
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sink", choices=["console", "spool"], default="console")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    ap.add_argument("--block", type=int, default=40, help="steps per configuration per round (default 40)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps per configuration first (default 20)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)

    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(64):
        chunk = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
        data.append((chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()))

    tmp = Path(tempfile.mkdtemp(prefix="wl-overhead-"))
    server = None
    try:
        if args.sink == "console":
            server, token = start_console(tmp)
            sink = {"url": f"http://127.0.0.1:{server.port}", "token": token, "spool_dir": tmp / "spool"}
            where = f"a live local console (uvicorn + SQLite, eager evaluation, starter pack) on port {server.port}"
        else:
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            sink = {"url": f"http://127.0.0.1:{port}", "token": "wl_unused", "spool_dir": tmp / "spool",
                    "retries": 0, "probe_seconds": 3600}
            where = f"a closed port (console down), spooling to {tmp / 'spool'}"
        configs = [Config(name, data, sink) for name in CONFIGS]
        params = sum(p.numel() for p in configs[0].model.parameters())
        print(f"Warning Light client overhead: {LAYERS}-block transformer, d_model {D}, {HEADS} heads, MLP {HIDDEN}, "
              f"vocab {VOCAB}, seq {SEQ}, batch {BATCH} ({params:,} parameters), AdamW, CPU")
        print(f"  torch {torch.__version__}, {args.threads} intra-op thread(s), Python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs; code {code_version()}")
        print(f"  client sends to {where}")
        health = configs[2].wl._health
        names = health.names if health is not None else []
        print(f"  health components ({len(names)}): {', '.join(names)}")
        for c in configs:
            c.run(args.warmup, record=False)
        print(f"  warm-up {args.warmup} steps each; then {args.rounds} rounds x {args.block} steps per configuration, "
              f"interleaved", flush=True)
        started = time.perf_counter()
        for r in range(args.rounds):
            order = configs[r % len(configs):] + configs[: r % len(configs)]
            for c in order:
                c.run(args.block)
        wall = time.perf_counter() - started
        stats = {}
        for c in configs:
            if c.wl is not None:
                stats[c.name] = c.wl.stats
                c.wl.close()
    finally:
        if server is not None:
            server.stop()

    base_med = statistics.median(configs[0].times)
    base_block = statistics.median(configs[0].blocks)
    print()
    print("| config | steps | median step ms | ratio | block mean ms | ratio | target (block mean) | |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    verdicts = []
    for c in configs:
        med, block = statistics.median(c.times), statistics.median(c.blocks)
        ratio, ratio_block = med / base_med, block / base_block
        target = TARGETS.get(c.name)
        verdict = "" if target is None else ("met" if ratio_block <= target else "MISSED")
        if target is not None:
            verdicts.append((c.name, ratio_block, target, verdict))
        print(f"| {c.name} | {len(c.times)} | {med * 1000:.2f} | {ratio:.4f} | {block * 1000:.2f} | {ratio_block:.4f} | "
              f"{'' if target is None else f'<= {target:.2f}'} | {verdict} |")
    print()
    for name, s in stats.items():
        print(f"  {name}: requests {s['requests']}, sent points {s['sent_points']:,}, events {s['sent_events']}, "
              f"spooled {s['spooled']:,}, dropped {s['dropped']}, rejected {s['rejected']}")
    print(f"  timed section {wall:.1f} s wall; overhead (median over rounds of each block's mean step time): "
          + ", ".join(f"{n} {100 * (r - 1):+.2f}% (target <= {100 * (t - 1):.0f}%: {v})" for n, r, t, v in verdicts))
    return 0 if all(v == "met" for *_, v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
