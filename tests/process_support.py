"""Helpers for tests that start real third-party servers (Alertmanager, MLflow): a free port, a bounded wait."""
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what, check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


ALERTMANAGER = "prometheus-alertmanager"
PROMETHEUS = "prometheus"


@contextmanager
def debian_server(binary_name: str, args, tmp_path, *, timeout=20.0):
    """Debian's `binary_name` (Alertmanager or Prometheus: both answer /-/ready) on a free port with `args` (a
    function of the port): an httpx client on its API, stopped afterwards.

    Under CI a missing binary fails the test instead of skipping it (`bin/test` installs the package).
    """
    import httpx
    import pytest

    from tests.conftest import IN_CI

    binary = shutil.which(binary_name)
    if binary is None:
        message = f"needs Debian's {binary_name} (apt-get install {binary_name}; bin/test installs it)"
        if IN_CI:
            pytest.fail(f"CI must run this test, but {message}")
        pytest.skip(message)
    port = free_port()
    log = tmp_path / f"{binary_name}.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen([binary, *args(port)], stdout=subprocess.DEVNULL, stderr=stderr)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)

    def ready():
        assert process.poll() is None, log.read_text()
        try:
            return client.get("/-/ready").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(f"{binary_name} to start", ready, timeout=timeout)
        yield client
    finally:
        process.terminate()
        process.wait(timeout=10)
        client.close()


def running_alertmanager(config_text: str, tmp_path):
    """Debian's Alertmanager with this config (no cluster: a lone Alertmanager otherwise waits for gossip to settle
    before its first notification)."""
    config = tmp_path / "alertmanager.yml"
    config.write_text(config_text)
    return debian_server(ALERTMANAGER, lambda port: [
        f"--config.file={config}", f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=", "--log.level=warn"], tmp_path)
