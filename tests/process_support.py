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


@contextmanager
def running_alertmanager(config_text: str, tmp_path):
    """Debian's Alertmanager on a free port with this config: an httpx client on its API, stopped afterwards.

    Under CI a missing binary fails the test instead of skipping it (`bin/test` installs the package).
    """
    import httpx
    import pytest

    from tests.conftest import IN_CI

    binary = shutil.which(ALERTMANAGER)
    if binary is None:
        message = f"needs Debian's {ALERTMANAGER} (apt-get install prometheus-alertmanager; bin/test installs it)"
        if IN_CI:
            pytest.fail(f"CI must run this test, but {message}")
        pytest.skip(message)
    config = tmp_path / "alertmanager.yml"
    config.write_text(config_text)
    port = free_port()
    log = tmp_path / "alertmanager.log"
    with open(log, "wb") as stderr:
        # No cluster: a lone Alertmanager otherwise waits for gossip to settle before its first notification.
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--cluster.listen-address=", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=stderr,
        )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)

    def ready():
        assert process.poll() is None, log.read_text()
        try:
            return client.get("/-/ready").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for("Alertmanager to start", ready)
        yield client
    finally:
        process.terminate()
        process.wait(timeout=10)
        client.close()
