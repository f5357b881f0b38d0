#!/usr/bin/env python
"""Client overhead: step time of a small transformer on CPU with and without the warninglight client.

    .venv/bin/pip install -e '.[faults]' -e ./client     # torch==2.13.0 (CPU) and the client
    .venv/bin/python benchmarks/client_overhead.py                    # live local console (default)
    .venv/bin/python benchmarks/client_overhead.py --sink spool       # console down: closed port, spooling
    .venv/bin/python benchmarks/client_overhead.py --rounds 4 --block 20 --threads 1
    .venv/bin/python benchmarks/client_overhead.py --quick --sink spool  # a minute: 4 rounds x 20 steps
    .venv/bin/python benchmarks/client_overhead.py --loop hf          # the real transformers Trainer (tiny GPT-2)
    .venv/bin/python benchmarks/client_overhead.py --loop lightning   # the real Lightning fit (the same GPT-2)

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
step time and its ratio to the baseline's, the block mean (the median over the rounds of each block's
mean step time) and its ratio, and the paired ratio: the median over the rounds of the configuration's
block mean divided by the mean of the two baselines' block means of the same round (each baseline alone
carries a few percent of its own, from where its tensors happen to live), with the range over the
rounds; the second baseline's paired ratio is against the first, the A/A noise floor.
The targets (log-only <= 1.01, health/10 <= 1.03, health/1 <= 1.10) are judged on the paired ratio,
and only where the A/A noise floor (the second baseline's paired ratio farthest from 1 in any round) is below
the target's margin: otherwise the verdict reads "no verdict" and says why (exit status 0: every target met,
1: one missed, 2: none missed but some left undecided by the noise). The paired ratio, not the median step:
with health every 10 steps nine steps in ten do only the per-step weight check (two norms of every
parameter tensor around the optimizer step), so the median step would hide the health step, and a send that costs one step a few ms shows in a mean, not in a median; pairing each block with
the baseline's block of the same round (a few seconds apart) cancels the load of other processes on a
shared machine that comes and goes over minutes, and the median over rounds keeps one disturbed round
from deciding.

--loop hf / --loop lightning: the same five configurations in the real trainers, each with the client's
callback (`warninglight.integrations.hf` / `.lightning`, opening its own watch as users do: log-only is
`model=None`, health/k the defaults with `health_every=k`) on a tiny GPT-2 built from a config
(`GPT2Config`: 4 blocks, d_model 64, 4 heads, vocabulary 256, sequence 32, batch 8, AdamW; no download),
about 20-30 ms a step on one thread of this CPU. The Trainer logs every --logging-steps (10) steps; the
LightningModule calls `self.log("train_loss", loss)` every step. Each configuration runs one
`Trainer.train()` / `Trainer.fit()` in its own thread, and the threads take turns holding a baton: a
callback passes it at the start of the step after each block of --block steps (after flushing that
configuration's watch, untimed) and waits for its next turn, in the same rotating order, so one
uninterrupted training run per configuration is interleaved with the others and only one trains at a time.
A step's time runs from the start of one optimizer step to the start of the next (the Trainer's
`on_step_begin`, Lightning's `on_train_batch_start`), so it holds the callbacks' work at the step's end and
the Trainer's logging. The targets there: log-only <= 1.02, health/10 <= 1.05 (paired ratio).

Beside the wall-clock figures, CPU time, which the load of other processes on a shared machine
disturbs far less: the training thread's own CPU time plus the client's sender thread's, per step
(median over the rounds of each block's), and its paired ratio to the baseline's. The last column is
the console's CPU time during each configuration's timed blocks, per timed step (its
process's user + system time from /proc): with the console on the same machine this is CPU the training
job competes with whenever it uses every core (torch's default thread count), which the step-time ratios
measured with one torch thread do not show.

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
import threading
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
TRAINER_TARGETS = {"log-only": 1.02, "health/10": 1.05}
GPT2_SEQ, GPT2_BATCH = 32, 8
GPT2 = dict(n_layer=4, n_embd=64, n_head=4, n_positions=GPT2_SEQ, vocab_size=VOCAB, bos_token_id=0, eos_token_id=0)
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
        self.console_cpu = 0.0
        self.cpu_blocks = []
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
        cpu0, own0, sender0 = console_cpu(), time.thread_time(), sender_cpu(wl)
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
        own = time.thread_time()
        if wl is not None:
            wl.flush(30)
        if record:
            self.console_cpu += console_cpu() - cpu0
            self.cpu_blocks.append((own - own0 + sender_cpu(wl) - sender0) / steps)


# ---------------------------------------------------------------------------------------------- real trainers
class Baton:
    """Whose turn it is: `schedule` lists configuration names, one entry per block, in the order they run."""

    def __init__(self, schedule):
        self.schedule = schedule
        self.pos = 0
        self.done = set()  # configurations whose trainer has returned (or failed): their turns are skipped
        self.cond = threading.Condition()

    def wait_turn(self, name):
        with self.cond:
            while self.pos < len(self.schedule) and self.schedule[self.pos] != name:
                self.cond.wait()

    def _advance(self):
        self.pos += 1
        while self.pos < len(self.schedule) and self.schedule[self.pos] in self.done:
            self.pos += 1
        self.cond.notify_all()

    def pass_on(self):
        with self.cond:
            self._advance()

    def finish(self, name):
        with self.cond:
            self.done.add(name)
            if self.pos < len(self.schedule) and self.schedule[self.pos] == name:
                self._advance()


class Pacer:
    """Times each optimizer step of one configuration's trainer and takes turns with the others.

    `tick()` is called at the start of every optimizer step: it closes the previous step's interval and, after
    a block's last step, flushes the watch (untimed) and passes the baton. The trainer runs one step more than
    the blocks hold, so that the last block's last step is timed; the baton is passed for the last time when
    `train()`/`fit()` has returned (`finish`), so a trainer's end never overlaps another's block."""

    def __init__(self, name, baton, blocks):
        self.name, self.baton = name, baton
        self.block_sizes = list(blocks)  # warm-up first (untimed), then the timed blocks
        self.index = 0
        self.in_block = 0
        self.t_prev = None
        self.times, self.blocks = [], []
        self.watch = None  # a callable giving the configuration's watch (or None)
        self.console_cpu = 0.0  # CPU seconds the console spent during this configuration's timed blocks
        self.cpu_blocks = []  # CPU seconds per step of each timed block: the training thread's and the sender's
        self._cpu0 = None

    def tick(self):
        now = time.perf_counter()
        if self.t_prev is None:  # the first step: wait for the first turn
            self.baton.wait_turn(self.name)
            self.t_prev = time.perf_counter()
            self.in_block = 1
            return
        if self.in_block == 1 and self.index > 0:
            self._cpu0 = (console_cpu(), time.thread_time(), sender_cpu(self.watch() if self.watch else None))
        timed = self.index > 0
        if timed:
            self.times.append(now - self.t_prev)
        if self.in_block < self.block_sizes[self.index]:
            self.in_block += 1
            self.t_prev = time.perf_counter()
            return
        if timed:
            self.blocks.append(statistics.fmean(self.times[-self.in_block:]))
        own = time.thread_time()
        wl = self.watch() if self.watch else None
        if wl is not None:
            wl.flush(30)  # the console has judged the block's telemetry when it answers
        if timed and self._cpu0 is not None:
            console0, own0, sender0 = self._cpu0
            self.console_cpu += console_cpu() - console0
            self.cpu_blocks.append((own - own0 + sender_cpu(wl) - sender0) / self.in_block)
        self.index += 1
        if self.index == len(self.block_sizes):  # the extra last step: keep the baton until the trainer returns
            self.t_prev = None
            return
        self.baton.pass_on()
        self.baton.wait_turn(self.name)
        self.in_block = 1
        self.t_prev = time.perf_counter()

    def finish(self):
        self.baton.finish(self.name)


class Data:
    """Fixed token batches of a learnable sequence task (so the loss falls as in real training)."""

    def __init__(self, n):
        gen = torch.Generator().manual_seed(1)
        start = torch.randint(0, VOCAB, (n, 1), generator=gen)
        stride = torch.randint(1, 8, (n, 1), generator=gen)
        self.rows = (start + stride * torch.arange(GPT2_SEQ)) % VOCAB

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def watch_options(name, sink):
    """The callback's watch() options for a configuration, or None for a baseline (no callback)."""
    if name.startswith("baseline"):
        return None
    options = dict(sink, run_id=f"overhead-{name.replace('/', '-')}-{os.getpid()}-{time.monotonic_ns()}", code_rev=False)
    if name == "log-only":
        options["model"] = None
    else:
        options["health_every"] = int(name.split("/")[1])
    return options


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(**GPT2))


class TrainerRun:
    """One configuration: a real trainer in its own thread, paced by the baton."""

    def __init__(self, loop, name, baton, blocks, sink, tmp, logging_steps):
        self.name = name
        self.pacer = Pacer(name, baton, blocks)
        self.steps = sum(blocks) + 1
        self.options = watch_options(name, sink)
        self.callback = None
        self.error = None
        self.stats = None
        self.thread = threading.Thread(target=self._run, args=(loop, tmp / name.replace("/", "-"), logging_steps),
                                       name=f"bench-{name}", daemon=True)

    @property
    def times(self):
        return self.pacer.times

    @property
    def blocks(self):
        return self.pacer.blocks

    @property
    def console_cpu(self):
        return self.pacer.console_cpu

    @property
    def cpu_blocks(self):
        return self.pacer.cpu_blocks

    def _run(self, loop, out, logging_steps):
        try:
            (self._hf if loop == "hf" else self._lightning)(out, logging_steps)
            if self.callback is not None:
                self.stats = self.callback.stats
        except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
            self.error = exc
            raise
        finally:
            self.pacer.finish()

    def _hf(self, out, logging_steps):
        import transformers
        from warninglight.integrations.hf import WarningLightCallback

        pacer = self.pacer

        class Pace(transformers.TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                pacer.tick()

        callbacks = [Pace()]
        if self.options is not None:
            self.callback = WarningLightCallback(**self.options)
            pacer.watch = lambda: self.callback.wl
            callbacks.append(self.callback)
        args = transformers.TrainingArguments(
            output_dir=str(out), max_steps=self.steps, per_device_train_batch_size=GPT2_BATCH, learning_rate=1e-3,
            weight_decay=0.1, logging_steps=logging_steps, save_strategy="no", eval_strategy="no", report_to=[],
            use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0)
        trainer = transformers.Trainer(model=gpt2(), args=args, train_dataset=Data(GPT2_BATCH * 64), callbacks=callbacks)
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)  # its print() of every log
        trainer.train()

    def _lightning(self, out, logging_steps):
        import lightning.pytorch as pl
        from warninglight.integrations.lightning import WarningLightCallback

        pacer = self.pacer

        class LM(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.lm = gpt2()

            def training_step(self, batch, batch_idx):
                loss = self.lm(**batch).loss
                self.log("train_loss", loss)
                return loss

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.1)

        class Pace(pl.Callback):
            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                pacer.tick()

        callbacks = [Pace()]
        if self.options is not None:
            self.callback = WarningLightCallback(**self.options)
            pacer.watch = lambda: self.callback.wl
            callbacks.append(self.callback)
        loader = torch.utils.data.DataLoader(Data(GPT2_BATCH * 64), batch_size=GPT2_BATCH, shuffle=True,
                                             generator=torch.Generator().manual_seed(0))
        trainer = pl.Trainer(max_steps=self.steps, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                             enable_model_summary=False, enable_checkpointing=False, num_sanity_val_steps=0,
                             default_root_dir=str(out), callbacks=callbacks)
        trainer.fit(LM(), loader)


def run_trainers(loop, args, sink, tmp):
    """Every configuration's real trainer, interleaved block by block; returns the runs (times, blocks, stats)."""
    names = CONFIGS
    schedule = list(names)  # the warm-up blocks
    for r in range(args.rounds):
        schedule += names[r % len(names):] + names[: r % len(names)]
    baton = Baton(schedule)
    runs = [TrainerRun(loop, name, baton, [args.warmup] + [args.block] * args.rounds, sink, tmp, args.logging_steps)
            for name in names]
    for run in runs:
        run.thread.start()
    for run in runs:
        run.thread.join()
    failed = [r for r in runs if r.error is not None]
    if failed:
        raise RuntimeError(f"{failed[0].name}: {failed[0].error!r}")
    return runs


CONSOLE_PID = None


def sender_cpu(wl) -> float:
    """CPU seconds the watch's sender thread has used so far (0 without a watch, or once it has ended)."""
    thread = getattr(getattr(wl, "_sender", None), "thread", None)
    if thread is None or not thread.is_alive():
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (OSError, AttributeError):
        return 0.0


def console_cpu() -> float:
    """CPU seconds (user + system, with its children) the console's process has used so far; 0 without one."""
    if CONSOLE_PID is None:
        return 0.0
    try:
        with open(f"/proc/{CONSOLE_PID}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def start_console(tmp: Path):
    sys.path.insert(0, str(HERE / "faults"))
    import run as faults  # noqa: E402  (its console helpers: service_env, manage)
    from benchmarks.support import Server  # noqa: E402

    env = faults.service_env(f"sqlite:///{tmp / 'overhead.sqlite3'}", tmp / "var")
    faults.manage(env, "migrate", "--noinput")
    token = faults.manage(env, "issue_token", "overhead", "--owner", "Bench On-call <oncall@example.org>").strip().splitlines()[-1]
    server = Server(env, tmp / "uvicorn.log", 1)
    server.wait_ready()
    global CONSOLE_PID
    CONSOLE_PID = server.proc.pid
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
    ap.add_argument("--loop", choices=["bare", "hf", "lightning"], default="bare",
                    help="a hand-written loop (default), the transformers Trainer or a Lightning fit")
    ap.add_argument("--sink", choices=["console", "spool"], default="console")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    ap.add_argument("--block", type=int, default=40, help="steps per configuration per round (default 40)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps per configuration first (default 20)")
    ap.add_argument("--logging-steps", type=int, default=10, help="the HF Trainer's logging_steps (default 10)")
    ap.add_argument("--flush-seconds", type=float, default=None, help="the client's flush_seconds (default: its own)")
    ap.add_argument("--batch-points", type=int, default=None, help="the client's batch_points (default: its own)")
    ap.add_argument("--quick", action="store_true",
                    help="4 rounds x 20 steps after 10 warm-up steps: a check that it runs (its noise floor rarely allows a verdict)")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.block, args.warmup = 4, 20, 10
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)

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
        for option in ("flush_seconds", "batch_points"):
            if getattr(args, option) is not None:
                sink[option] = getattr(args, option)
                where += f", {option}={getattr(args, option)}"
        versions = (f"  torch {torch.__version__}, {args.threads} intra-op thread(s), Python {platform.python_version()}, "
                    f"{os.cpu_count()} CPUs; code {code_version()}")
        if args.loop == "bare":
            configs, stats, wall = run_bare(args, sink, where, versions)
            targets = TARGETS
        else:
            import transformers

            transformers.logging.set_verbosity_error()
            params = sum(p.numel() for p in gpt2().parameters())
            framework = (f"transformers {transformers.__version__} Trainer (logging_steps {args.logging_steps})"
                         if args.loop == "hf" else f"lightning {__import__('lightning').__version__} fit")
            print(f"Warning Light client overhead in the {framework}: GPT-2 from GPT2Config, {GPT2['n_layer']} blocks, "
                  f"d_model {GPT2['n_embd']}, {GPT2['n_head']} heads, vocab {VOCAB}, seq {GPT2_SEQ}, batch {GPT2_BATCH} "
                  f"({params:,} parameters), AdamW, CPU")
            print(versions)
            print(f"  client sends to {where}")
            print(f"  warm-up {args.warmup} steps each; then {args.rounds} rounds x {args.block} steps per configuration, "
                  f"interleaved (one {args.loop} run per configuration, in turns)", flush=True)
            started = time.perf_counter()
            configs = run_trainers(args.loop, args, sink, tmp)
            wall = time.perf_counter() - started
            stats = {c.name: c.stats for c in configs if c.stats is not None}
            targets = TRAINER_TARGETS
    finally:
        if server is not None:
            server.stop()
    return report(configs, stats, wall, targets)


def run_bare(args, sink, where, versions):
    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(64):
        chunk = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
        data.append((chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()))
    configs = [Config(name, data, sink) for name in CONFIGS]
    params = sum(p.numel() for p in configs[0].model.parameters())
    print(f"Warning Light client overhead: {LAYERS}-block transformer, d_model {D}, {HEADS} heads, MLP {HIDDEN}, "
          f"vocab {VOCAB}, seq {SEQ}, batch {BATCH} ({params:,} parameters), AdamW, CPU")
    print(versions)
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
    return configs, stats, wall


def paired_ratios(c, configs, field):
    """Per round: the configuration's block figure over the reference of the same round. The reference is the
    mean of the two baselines (each alone carries a few percent of its own from where its tensors live); the
    second baseline's own row is against the first, so its spread around 1 is the A/A noise floor."""
    first, second = getattr(configs[0], field), getattr(configs[-1], field)
    if c is configs[0]:
        return [1.0] * len(first)
    if c is configs[-1]:
        return [b / a for a, b in zip(first, second)]
    return [x / ((a + b) / 2) for x, a, b in zip(getattr(c, field), first, second)]


def noise_floor(configs, field="blocks") -> float:
    """The A/A noise floor: the largest distance from 1 of the second baseline's paired ratio in any round.
    Two identical configurations differ by this much on this machine and method, so an overhead target
    closer to 1 than this cannot be told met or missed."""
    return max(abs(r - 1) for r in paired_ratios(configs[-1], configs, field))


def verdict_of(paired, target, noise) -> str:
    # A verdict only where the method can resolve it: with the A/A rounds spread wider than the target's
    # margin, "met" or "MISSED" would be the machine's load speaking, not the client.
    if noise >= target - 1:
        return "no verdict"
    return "met" if paired <= target else "MISSED"


def report(configs, stats, wall, targets) -> int:
    base = configs[0]
    base_med = statistics.median(base.times)
    base_block = statistics.median(base.blocks)
    noise = noise_floor(configs)
    print()
    print("| config | steps | median step ms | ratio | block mean ms | ratio | paired ratio (range over rounds) "
          "| target (paired) | | process CPU ms/step | paired CPU ratio | console CPU ms/step |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    verdicts = []
    for c in configs:
        med, block = statistics.median(c.times), statistics.median(c.blocks)
        ratio, ratio_block = med / base_med, block / base_block
        pairs = paired_ratios(c, configs, "blocks")
        paired = statistics.median(pairs)
        target = targets.get(c.name)
        verdict = "" if target is None else verdict_of(paired, target, noise)
        if target is not None:
            verdicts.append((c.name, paired, target, verdict))
        print(f"| {c.name} | {len(c.times)} | {med * 1000:.2f} | {ratio:.4f} | {block * 1000:.2f} | {ratio_block:.4f} | "
              f"{paired:.4f} ({min(pairs):.3f}-{max(pairs):.3f}) | {'' if target is None else f'<= {target:.2f}'} | "
              f"{verdict} | {1000 * statistics.median(c.cpu_blocks):.2f} | "
              f"{statistics.median(paired_ratios(c, configs, 'cpu_blocks')):.4f} | "
              f"{1000 * c.console_cpu / len(c.times):.2f} |")
    print()
    for name, s in stats.items():
        print(f"  {name}: requests {s['requests']}, sent points {s['sent_points']:,}, events {s['sent_events']}, "
              f"spooled {s['spooled']:,}, dropped {s['dropped']}, rejected {s['rejected']}, "
              f"repeated steps {s['repeated_steps']}")
    print(f"  A/A noise floor (the second baseline's paired ratio, farthest round from 1): ±{100 * noise:.2f}% wall clock, "
          f"±{100 * noise_floor(configs, 'cpu_blocks'):.2f}% CPU")
    print(f"  timed section {wall:.1f} s wall; overhead (paired ratio: median over rounds of block mean / the baselines'): "
          + ", ".join(f"{n} {100 * (r - 1):+.2f}% (target <= {100 * (t - 1):.0f}%: {v})" for n, r, t, v in verdicts))
    undecided = [(n, t) for n, _, t, v in verdicts if v == "no verdict"]
    if undecided:
        print(f"  no verdict on {', '.join(f'{n} (target {100 * (t - 1):.0f}%)' for n, t in undecided)}: the A/A noise "
              f"floor ±{100 * noise:.2f}% is not below the target, so this machine cannot tell it met or missed; "
              f"re-run on a quieter machine or with more --rounds")
    if any(v == "MISSED" for *_, v in verdicts):
        return 1
    return 2 if undecided else 0


if __name__ == "__main__":
    sys.exit(main())
