"""What every benchmark needs to run the console for real: a free port, processes in their own groups, and
uvicorn started, waited for and stopped. Scripts import it as `benchmarks.support` (the repository root on
sys.path, never benchmarks/ itself, where ingest.py would shadow the `ingest` app)."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, n=4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


class Procs:
    """Subprocesses in their own process groups, ended (TERM, then KILL) on any exit."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []

    def start(self, name: str, argv: list[str], env: dict, log: Path | None = None) -> subprocess.Popen:
        log = log or self.logdir / f"{name}.log"
        with open(log, "ab") as fh:
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append((name, proc, log))
        return proc

    def check_alive(self):
        for name, proc, log in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; log tail:\n{tail(log)}")

    def stop_all(self):
        for _name, proc, _log in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for _name, proc, _log in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for _name, proc, _log in self.procs:
            # The group may hold children (uvicorn workers, celery pool) even after the leader is gone.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()


def uvicorn_argv(port: int, workers: int = 1) -> list[str]:
    argv = [PYTHON, "-m", "uvicorn", "opsconsole.asgi:application", "--host", "127.0.0.1", "--port", str(port),
            "--no-access-log", "--log-level", "warning"]
    return argv + (["--workers", str(workers)] if workers > 1 else [])


def wait_http(port: int, procs: Procs, timeout=60.0):
    """Until the console answers; an unauthenticated read must be refused (401/403), anything else is wrong."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/v1/runs/")
            status = conn.getresponse().status
            conn.close()
            if status in (401, 403):
                return
            raise RuntimeError(f"server answered {status} to an unauthenticated GET /api/v1/runs/")
        except (ConnectionError, OSError, http.client.HTTPException):
            time.sleep(0.25)
    raise RuntimeError(f"server did not answer on port {port} within {timeout:.0f}s")


class Server:
    """One uvicorn serving the console on a free port, in its own process group."""

    def __init__(self, env: dict, log: Path, workers: int = 1):
        self.port = free_port()
        self.log = log
        self.procs = Procs(log.parent)
        self.proc = self.procs.start("uvicorn", uvicorn_argv(self.port, workers), env, log=log)

    def check_alive(self):
        self.procs.check_alive()

    def wait_ready(self, timeout=60.0):
        wait_http(self.port, self.procs, timeout)

    def stop(self):
        self.procs.stop_all()

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""
