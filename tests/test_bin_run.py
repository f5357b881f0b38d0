"""`bin/run` as a newcomer runs it, as a real process: the address it serves is the one it links to and announces;
it is not a debug server; a second start, a port in use or a server that dies is refused or reported, never announced.

The install and the demo replay are skipped (WL_NO_INSTALL=1, WL_NO_DEMO=1) to keep this fast; everything else is
the script as it runs on a fresh clone, with its own var/ directory.
"""
import http.cookiejar
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What a newcomer's shell does not have: the suite's own settings and services.
SCRUBBED = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY", "ALLOWED_HOSTS", "DEBUG", "CONSOLE_URL",
            "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "LOG_LEVEL", "WL_HOST", "PYTHONPATH"}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BinRun:
    """bin/run in its own process group, its output collected as it comes."""

    def __init__(self, var, port, **env):
        environ = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        environ.update(WL_VAR_DIR=str(var), WL_PORT=str(port), WL_NO_INSTALL="1", WL_NO_DEMO="1", WL_VENV=sys.prefix, **env)
        self.var, self.port, self.url = Path(var), port, f"http://127.0.0.1:{port}"
        self.lines = []
        self.process = subprocess.Popen([str(ROOT / "bin" / "run")], cwd=ROOT, env=environ, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self):
        return "\n".join(self.lines)

    def wait_for(self, text, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.process.poll() is not None:
                self.reader.join(timeout=5)
                if any(text in line for line in self.lines):
                    return
                raise AssertionError(f"bin/run exited ({self.process.returncode}) without {text!r}:\n{self.output}")
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} within {timeout} s:\n{self.output}")

    def finish(self, timeout=30):
        """Its exit status (it is expected to stop on its own)."""
        status = self.process.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return status

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.reader.join(timeout=5)

    def query(self, sql):
        with sqlite3.connect(self.var / "warninglight.sqlite3") as db:
            return db.execute(sql).fetchall()


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    run = BinRun(tmp_path_factory.mktemp("var"), free_port())
    try:
        run.wait_for("Console: ")
        yield run
    finally:
        run.stop()


def copy_of(var, to):
    """A second var/ directory holding the same console (database, secret key, login, token), not its lock."""
    to.mkdir()
    for name in ("secret_key", "demo-login.txt", "demo-token.txt"):
        shutil.copy2(var / name, to / name)
    with sqlite3.connect(var / "warninglight.sqlite3") as source, sqlite3.connect(to / "warninglight.sqlite3") as copy:
        source.backup(copy)  # consistent while the first console runs
    return to


def get(url, opener=None):
    try:
        response = (opener or urllib.request.build_opener()).open(url, timeout=10)
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()
    return response.status, response.headers, response.read().decode()


def test_it_announces_the_address_it_serves(console):
    assert f"Console: {console.url}/" in console.lines
    assert get(console.url + "/accounts/login/")[0] == 200


def test_runbook_links_point_at_the_port_it_serves(console):
    links = [url for (url,) in console.query("SELECT diagnostic_url FROM alerts_rule")]
    from alerts.starter import STARTER_RULES

    assert len(links) == len(STARTER_RULES) and all(url.startswith(f"{console.url}/runbooks/") for url in links), links
    status, _, page = get(links[0])
    assert status == 200 and "The rule as shipped" in page


def test_it_is_not_a_debug_server(console):
    status, _, page = get(console.url + "/no-such-page/")
    assert status == 404 and '<header class="top">' in page and "URLconf" not in page
    status, headers, body = get(console.url + "/api/v1/ingest/")
    assert status == 404 and headers["Content-Type"] == "application/json" and json.loads(body)["errors"]
    secret = (console.var / "secret_key").read_text().strip()
    assert len(secret) >= 50 and oct((console.var / "secret_key").stat().st_mode & 0o777) == "0o600"


def log_in(url, var):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    get(url + "/accounts/login/", opener)
    csrf = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
    username, password = (Path(var) / "demo-login.txt").read_text().split()
    form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": csrf}).encode()
    opener.open(urllib.request.Request(url + "/accounts/login/", data=form, headers={"Referer": url + "/accounts/login/"}), timeout=10)
    return opener


def test_a_login_holds_over_plain_http(console):
    opener = log_in(console.url, console.var)
    status, _, page = get(console.url + "/", opener)
    assert status == 200 and "Log out" in page


def test_the_printed_token_is_kept_and_takes_data(console):
    token = (console.var / "demo-token.txt").read_text().strip()
    assert f"Ingest token for project 'demo': {token}" in console.output
    body = json.dumps({"run": {"id": "newcomer-1"}, "points": [{"step": 1, "metric": "loss", "value": "NaN"}]}).encode()
    request = urllib.request.Request(console.url + "/api/v1/ingest", data=body,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert urllib.request.urlopen(request, timeout=10).status == 202


def test_a_second_start_is_refused_before_anything_is_issued(console):
    tokens = console.query("SELECT COUNT(*) FROM ingest_projecttoken")
    again = BinRun(console.var, console.port)
    try:
        status = again.finish(timeout=20)
    finally:
        again.stop()
    assert status != 0
    assert "already running" in again.output and console.url in again.output
    assert "Console:" not in again.output and "token" not in again.output.lower()
    assert console.query("SELECT COUNT(*) FROM ingest_projecttoken") == tokens
    assert get(console.url + "/accounts/login/")[0] == 200  # the first one is untouched


def test_a_port_in_use_is_refused_before_anything_is_set_up(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        run = BinRun(tmp_path, holder.getsockname()[1])
        try:
            status = run.finish(timeout=20)
        finally:
            run.stop()
    assert status != 0
    assert f"127.0.0.1:{run.port}" in run.output and "WL_PORT" in run.output and "Console:" not in run.output
    assert not (tmp_path / "warninglight.sqlite3").exists() and not (tmp_path / "demo-token.txt").exists()


def test_a_server_that_dies_on_start_is_reported_not_announced(console, tmp_path):
    # The server fails as a broken install would; everything before it (migrate, bootstrap) runs for real.
    inject = tmp_path / "inject" / "uvicorn"
    inject.mkdir(parents=True)
    (inject / "__init__.py").write_text("raise ImportError('injected: the server cannot start')\n")
    run = BinRun(copy_of(console.var, tmp_path / "var"), free_port(), PYTHONPATH=str(inject.parent))
    try:
        status = run.finish(timeout=60)
    finally:
        run.stop()
    assert status != 0
    assert "injected: the server cannot start" in run.output and "did not start" in run.output
    assert "Console:" not in run.output


def test_a_restart_on_another_port_keeps_logins_and_its_runbook_links_work(console, tmp_path):
    opener = log_in(console.url, console.var)
    moved = BinRun(copy_of(console.var, tmp_path / "var"), free_port())  # the same console, started again on another port
    try:
        moved.wait_for("Console: ")
        status, _, page = get(moved.url + "/", opener)
        assert status == 200 and "Log out" in page  # the kept secret key: the session still holds
        [(rule_id,)] = moved.query("SELECT id FROM alerts_rule WHERE name = 'loss-spike'")
        status, _, page = get(f"{moved.url}/rules/{rule_id}/", opener)
        # The stored link still names the first port; the page opens the runbook where the console is now.
        assert f"{console.url}/runbooks/loss-spike/" in page
        assert 'href="/runbooks/loss-spike/"' in page and get(moved.url + "/runbooks/loss-spike/")[0] == 200
    finally:
        moved.stop()


def test_two_consoles_started_at_once_on_one_port_announce_one(console, tmp_path):
    # Both find the port free at first; only the one whose server holds it may announce it.
    port = free_port()
    runs = [BinRun(copy_of(console.var, tmp_path / f"var{i}"), port) for i in range(2)]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all("Console: " in run.output or run.process.poll() is not None for run in runs):
            time.sleep(0.2)
        time.sleep(1)  # a late announcement would show by now
        statuses = [run.process.poll() for run in runs]
    finally:
        for run in runs:
            run.stop()
    announced = [run for run in runs if "Console: " in run.output]
    assert len(announced) == 1, [run.output for run in runs]
    refused = runs[1 - runs.index(announced[0])]
    assert statuses[runs.index(refused)] not in (0, None) and "cannot serve" in refused.output
