"""Helpers for the `warninglight follow` tests: event files written by the real SummaryWriter, the command
run as a user runs it, waiting for points to reach the console."""
import os
import subprocess
import sys
import time

import numpy as np

from tests.client.support import CLIENT_DIR, read_points


def f32(x):
    """A value as TensorBoard stores it (a 32-bit float)."""
    return float(np.float32(x))


def write_scalars(log_dir, scalars, *, flush=True):
    """`scalars`: (step, tag, value) written with torch's SummaryWriter; returns the open writer."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(log_dir))
    add(writer, scalars, flush=flush)
    return writer


def add(writer, scalars, flush=True):
    for step, tag, value in scalars:
        writer.add_scalar(tag, value, step)
    if flush:
        writer.flush()


def follow_command(*args, url, token, **popen):
    """`warninglight follow ...` in a process of its own, url and token from the environment as a job has them."""
    env = {**os.environ, "WARNINGLIGHT_URL": url, "WARNINGLIGHT_TOKEN": token,
           "PYTHONPATH": os.pathsep.join([str(CLIENT_DIR), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "warninglight", "follow", *map(str, args)]
    if popen.pop("background", False):
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, **popen)


def wait_for_points(token, run_id, metric, count, timeout=30.0, component=None):
    deadline = time.monotonic() + timeout
    points = []
    while time.monotonic() < deadline:
        try:
            points = read_points(token, run_id, metric, component=component)
        except AssertionError:  # the run does not exist yet
            points = []
        if len(points) >= count:
            return points
        time.sleep(0.1)
    raise AssertionError(f"{run_id} {metric}: {len(points)} points after {timeout} s, expected {count}")
