"""`warninglight follow DIR`: a TensorBoard log directory's scalars to the console, without touching the
training code.

Every directory under DIR that holds event files (`events.out.tfevents.*`) is a run, named by its path
relative to DIR (DIR itself by its own name), optionally behind `--run-prefix`. Each scalar is sent at
its event's `global_step`, with the time it was written. The event files are read by TensorBoard's own
loader (`tensorboard.backend.event_processing.event_file_loader.EventFileLoader`, the `tensorboard`
extra): it stops at a record still being written and carries on from it once it is complete, so a file
can be followed while the job writes it.

Tags become metrics and components by `map_tag` (documented in the client README, "TensorBoard logs").

Restarts. A resumed job writes steps again: the follower starts a new attempt (a `restart` phase at the
step) when a run's new event file writes a step a series already sent with another value (or one below
it), or when a series goes back below a step it sent (TensorBoard drops such "orphaned" points from its
own charts too). A step written again with the same value (Lightning's `epoch` with the validation logs,
its `hp_metric` in a resumed job's new file), or again within one file, is a repeat and not sent.

Resuming. What was read is kept in a state file (by default `DIR/.warninglight-follow.json`): the
number of events taken from each file and, per run, each series' last step in the current attempt.
It is written once what was read has been sent (or spooled), so a follower started again carries on
where the last one stopped without sending a step twice (the console would take a step sent again for
a restart).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import signal
import sys
import time
from pathlib import Path

from . import wire
from .integrations import metric_name

log = logging.getLogger("warninglight")

STATE_NAME = ".warninglight-follow.json"
RESTART_SETTLE = 10  # steps in the `restart` phase after a resume, as the framework callbacks do

TRAIN, EVAL, TEST = "train", "eval", "test"
PHASE_WORDS = {"train": TRAIN, "training": TRAIN, "eval": EVAL, "evaluation": EVAL, "val": EVAL, "valid": EVAL,
               "validation": EVAL, "test": TEST}
_UNDERSCORE_PHASE = re.compile(r"(train|training|eval|evaluation|val|valid|validation|test)_(.+)\Z", re.IGNORECASE)
_BAD_COMPONENT_CHARS = re.compile(r"[^A-Za-z0-9._:/\[\]-]")


def map_tag(tag: str, components: bool = True):
    """A TensorBoard tag -> (metric, component or None, phase or None), the phase being "train", "eval",
    "test" or None. The rule (client README, "TensorBoard logs"):

    1. The phase: a first path segment `train`/`training`, `eval`/`evaluation`/`val`/`valid`/`validation`
       or `test` (`train/loss`, `eval/accuracy`); else the last of two segments (`Loss/train`, PyTorch's
       tutorial style); else a first word before `_` (`train_loss`, `val_acc`, Lightning's style, where a
       trailing `_step` is dropped: `train_loss_step` is the step value of `train_loss`). Case is ignored.
    2. The component: what is left splits at its first `/` into metric and component
       (`grad_norm/layers.3` -> metric `grad_norm`, component `layers.3`). `components=False` keeps it whole.
    3. The name, in the console's vocabulary (the same as the Hugging Face and Lightning callbacks):
       training `loss` -> `loss`, `learning_rate` -> `lr`, anything else as it is (`train/grad_norm` ->
       `grad_norm`); evaluation `loss` -> `val_loss`, anything else `x` -> `eval/x`; test `x` -> `test/x`;
       no phase: the tag as it is. Characters outside the contract's alphabet become `_`.
    """
    tag = str(tag)
    parts = tag.split("/")
    phase, rest = None, tag
    if len(parts) > 1 and parts[0].lower() in PHASE_WORDS and "/".join(parts[1:]):
        phase, rest = PHASE_WORDS[parts[0].lower()], "/".join(parts[1:])
    elif len(parts) == 2 and parts[1].lower() in PHASE_WORDS and parts[0]:
        phase, rest = PHASE_WORDS[parts[1].lower()], parts[0]
    else:
        match = _UNDERSCORE_PHASE.match(tag)
        if match and "/" not in match.group(1):
            phase, rest = PHASE_WORDS[match.group(1).lower()], match.group(2)
            if rest.lower().endswith("_step") and len(rest) > 5:
                rest = rest[:-5]
    component = None
    if components and "/" in rest:
        name, component = rest.split("/", 1)
        if not name or not component:
            name, component = rest, None
        else:
            component = _BAD_COMPONENT_CHARS.sub("_", component)[:256]
    else:
        name = rest
    low = name.lower()
    if phase == TRAIN:
        name = "loss" if low == "loss" else "lr" if low in ("learning_rate", "lr") else name
    elif phase == EVAL:
        name = "val_loss" if low == "loss" else "eval/" + name
    elif phase == TEST:
        name = "test/" + name
    return metric_name(name), component, phase


def scalar_of(value):
    """The float of a scalar summary value (TensorBoard's loader has migrated `simple_value` to a tensor
    of the `scalars` plugin), None for anything else (histograms, images, text, hparams)."""
    if value.HasField("tensor"):
        if value.metadata.plugin_data.plugin_name != "scalars":
            return None
        from tensorboard.util import tensor_util

        try:
            array = tensor_util.make_ndarray(value.tensor)
        except Exception:
            return None
        if array.size != 1 or array.dtype.kind not in "fiu":
            return None
        return float(array.reshape(()))
    if value.WhichOneof("value") == "simple_value":
        return float(value.simple_value)
    return None


def _file_order(path: Path):
    """Event files in the order they were created: `events.out.tfevents.<unix seconds>.<host>.<pid>.<n>`."""
    parts = path.name.split(".")
    numbers = [int(p) if p.isdigit() else -1 for p in (parts[3:4] + parts[-1:])]
    return numbers[0] if numbers else -1, path.name.rsplit(".", 1)[0], numbers[-1] if numbers else -1


class _Everything:
    def __contains__(self, item):
        return True

    def add(self, item):
        pass


class RunFollower:
    """One run: its watch, the series' last steps in the current attempt, its phases."""

    def __init__(self, follower, run_id, saved=None):
        self.follower = follower
        self.run_id = run_id
        saved = saved or {}
        # (metric, component) -> [step, value token] of the current attempt
        self.series = {(m, c): [s, t] for m, c, s, t in saved.get("series", [])}
        self.settle_until = saved.get("settle_until")  # the `restart` phase lasts until this step
        self.last_eval = saved.get("last_eval")
        self.wl = None
        self.sent = 0

    def state(self):
        return {"series": [[m, c, s, t] for (m, c), (s, t) in self.series.items()], "settle_until": self.settle_until, "last_eval": self.last_eval}

    def watch(self):
        if self.wl is None:
            from .watcher import Watch

            f = self.follower
            self.wl = Watch(self.run_id, f.url, f.token, code_rev=False, spool_dir=f.spool_dir,
                            flush_seconds=f.flush_seconds, rank=0, world_size=1,
                            per_rank=False, **f.watch_options)  # one reader of the logs, whatever RANK says
        return self.wl

    def regular_phase(self, step):
        return "restart" if self.settle_until is not None and step < self.settle_until else "steady"

    def restart(self, step, when):
        wl = self.watch()
        wl._phase_at("restart", step, when)  # from here the console keeps the steps as a new attempt
        self.series.clear()
        self.last_eval = None
        self.settle_until = step + RESTART_SETTLE
        if self.follower.phases:
            wl._phase_at("steady", self.settle_until, when)
        log.info("warninglight follow: run %s restarted at step %s (a new attempt)", self.run_id, step)

    def take(self, event, in_file):
        """Send an event's scalars; `in_file`: the series this event file has written so far (updated)."""
        points = []
        step = event.step
        when = event.wall_time if math.isfinite(event.wall_time) and event.wall_time > 0 else time.time()
        f = self.follower
        for value in event.summary.value:
            number = scalar_of(value)
            if number is not None:
                points.append((*map_tag(value.tag, f.components), number))
        if not points or not 0 <= step <= wire.MAX_STEP:
            return
        wl = self.watch()
        out = []
        for metric, component, phase, number in points:
            token = wire.value_token(number)
            key = (metric, component)
            seen = self.series.get(key)
            first_in_file = key not in in_file
            in_file.add(key)
            if seen is not None:
                if step < seen[0]:
                    self.restart(step, when)  # back below a step sent: TensorBoard too drops the points it orphans
                elif step == seen[0]:
                    if token == seen[1] or not first_in_file:
                        continue  # written again at the same step (Lightning's `epoch` with the validation logs)
                    self.restart(step, when)  # a new file writing a sent step with another value: a resumed job
            self.series[key] = [step, token]
            if phase == EVAL and f.phases and self.last_eval != step:
                self.last_eval = step
                wl._phase_at("eval", step, when)
                wl._phase_at(self.regular_phase(step + 1), step + 1, when)
            out.append((metric, component, number))
        if out:
            wl._health_points(step, out, when=when)
            self.sent += len(out)


class Follower:
    """Follows a log directory: `poll()` reads what is new and queues it; `flush()` waits until it is sent
    and writes the state file."""

    def __init__(self, logdir, url=None, token=None, *, state_path=None, run_prefix="", components=True, phases=True,
                 spool_dir=None, flush_seconds=1.0, flush_timeout=60.0, **watch_options):
        try:
            from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        except ImportError as exc:
            raise RuntimeError("warninglight follow reads event files with TensorBoard's own loader: "
                               "pip install 'warninglight[tensorboard]'") from exc
        self._loader_class = EventFileLoader
        self.logdir = Path(logdir).resolve()
        self.url = url if url is not None else os.environ.get("WARNINGLIGHT_URL") or None
        self.token = token if token is not None else os.environ.get("WARNINGLIGHT_TOKEN") or None
        self.state_path = Path(state_path) if state_path else self.logdir / STATE_NAME
        self.run_prefix = run_prefix or ""
        self.components = components
        self.phases = phases
        self.spool_dir = spool_dir
        self.flush_seconds = flush_seconds
        self.flush_timeout = flush_timeout
        self.watch_options = watch_options
        self.loaders = {}  # event file path -> [loader, events taken, scalars seen yet]
        self.runs = {}
        self.saved = self._load_state()
        self.dirty = False

    # ---- state ---------------------------------------------------------------------------------
    def _load_state(self):
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {"files": {}, "runs": {}}
        except (OSError, ValueError) as exc:
            log.warning("warninglight follow: cannot read the state file %s (%s); starting from the beginning", self.state_path, exc)
            return {"files": {}, "runs": {}}
        if not isinstance(data, dict) or data.get("version") != 1:
            return {"files": {}, "runs": {}}
        return {"files": dict(data.get("files") or {}), "runs": dict(data.get("runs") or {})}

    def _save_state(self):
        files = dict(self.saved["files"])
        for path, (_, taken, _) in self.loaders.items():
            files[self._rel(path)] = taken
        runs = dict(self.saved["runs"])
        for run_id, run in self.runs.items():
            runs[run_id] = run.state()
        data = {"version": 1, "logdir": str(self.logdir), "files": files, "runs": runs}
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(data))
            os.replace(tmp, self.state_path)
        except OSError as exc:
            log.warning("warninglight follow: cannot write the state file %s (%s); a follower started again would "
                        "send what was read again", self.state_path, exc)
            return
        self.dirty = False

    # ---- reading -------------------------------------------------------------------------------
    def _rel(self, path: Path) -> str:
        return path.relative_to(self.logdir).as_posix()

    def run_id_of(self, directory: Path) -> str:
        rel = directory.relative_to(self.logdir).as_posix()
        name = self.logdir.name if rel == "." else rel
        return wire.sanitize_run_id(self.run_prefix + name)[0]

    def event_files(self):
        found = []
        for root, dirs, files in os.walk(self.logdir):
            dirs.sort()
            for name in files:
                if "tfevents" in name and not name.endswith(".tmp"):
                    found.append(Path(root) / name)
        return sorted(found, key=lambda p: (p.parent.as_posix(), _file_order(p)))

    def run(self, run_id):
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunFollower(self, run_id, self.saved["runs"].get(run_id))
        return run

    def poll(self) -> int:
        """Read everything new in every event file; returns the number of points queued."""
        before = sum(r.sent for r in self.runs.values())
        for path in self.event_files():
            entry = self.loaders.get(path)
            if entry is None:
                try:
                    loader = self._loader_class(str(path))
                except Exception as exc:
                    log.warning("warninglight follow: cannot open %s (%s)", path, exc)
                    continue
                skip = int(self.saved["files"].get(self._rel(path), 0))
                # The series an event file has written so far; for a file a previous follower read, all of them.
                entry = self.loaders[path] = [loader, 0, _Everything() if skip else set()]
                if skip:
                    for _ in loader.Load():  # what a previous follower sent already
                        entry[1] += 1
                        if entry[1] >= skip:
                            break
            loader = entry[0]
            run = None
            for event in loader.Load():
                entry[1] += 1
                self.dirty = True
                if not event.HasField("summary"):
                    continue
                run = run or self.run(self.run_id_of(path.parent))
                run.take(event, entry[2])
        return sum(r.sent for r in self.runs.values()) - before

    def flush(self) -> bool:
        """Wait until everything queued is sent or spooled, then record what was read in the state file."""
        ok = True
        for run in self.runs.values():
            if run.wl is not None and not run.wl.flush(self.flush_timeout):
                ok = False
        if ok and self.dirty:
            self._save_state()
        return ok

    def follow(self, once=False, interval=5.0, stop=None):
        """Poll every `interval` seconds until `stop()` is true (or once)."""
        while True:
            self.poll()
            self.flush()
            deadline = time.monotonic() + interval
            while True:
                if once or (stop is not None and stop()):
                    return
                if time.monotonic() >= deadline:
                    break
                time.sleep(min(0.1, interval))

    def close(self):
        for run in self.runs.values():
            if run.wl is not None:
                run.wl.close(self.flush_timeout)
        if self.dirty and all(r.wl is None or not r.wl._sender.queue for r in self.runs.values()):
            self._save_state()

    def stats(self) -> dict:
        totals = {"runs": len(self.runs), "points": sum(r.sent for r in self.runs.values())}
        for key in ("sent_points", "spooled", "rejected", "refused"):
            totals[key] = sum(r.wl.stats[key] for r in self.runs.values() if r.wl is not None)
        return totals


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="warninglight follow",
        description="Follow a TensorBoard log directory and send its scalars to Warning Light. Every directory "
                    "holding event files is a run, named by its path under DIR.")
    parser.add_argument("logdir", metavar="DIR", help="the log directory (SummaryWriter's log_dir, Lightning's save_dir, the Trainer's logging_dir)")
    parser.add_argument("--url", help="the console (default: $WARNINGLIGHT_URL)")
    parser.add_argument("--token", help="a project token (default: $WARNINGLIGHT_TOKEN)")
    parser.add_argument("--once", action="store_true", help="send what is there now and exit (after the fact)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between polls (default 5)")
    parser.add_argument("--state", help=f"the state file (default DIR/{STATE_NAME})")
    parser.add_argument("--run-prefix", default="", help="put before every run id, e.g. 'team-a/' (run ids are unique across the console)")
    parser.add_argument("--no-components", action="store_true", help="send tags with a '/' as whole metric names")
    parser.add_argument("--no-phases", action="store_true", help="send no eval/steady phases (restarts are still sent)")
    parser.add_argument("--spool-dir", help="where batches the console could not take are kept (default ./warninglight-spool)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    if not Path(args.logdir).is_dir():
        parser.error(f"{args.logdir} is not a directory")
    try:
        follower = Follower(args.logdir, args.url, args.token, state_path=args.state, run_prefix=args.run_prefix,
                            components=not args.no_components, phases=not args.no_phases, spool_dir=args.spool_dir)
    except RuntimeError as exc:
        print(f"warninglight follow: {exc}", file=sys.stderr)
        return 2
    if follower.url is None:
        print("warninglight follow: no --url nor WARNINGLIGHT_URL: batches go to the spool directory", file=sys.stderr)

    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        follower.follow(once=args.once, interval=args.interval, stop=lambda: bool(stopping))
    finally:
        follower.close()
    s = follower.stats()
    print(f"warninglight follow: {s['runs']} runs, {s['points']} points read, {s['sent_points']} accepted by the console, "
          f"{s['spooled']} items spooled, {s['rejected'] + s['refused']} refused", file=sys.stderr)
    return 0 if not (s["spooled"] or s["refused"]) else 1
