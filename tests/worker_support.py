"""Support for tests that need real services around the test process: a Celery worker process, PostgreSQL's admin side.

`celery_worker` starts `celery -A opsconsole worker` as its own process (its
own process group, so a test can kill it as a machine would) on the suite's
Redis and test database; batches posted while `task_always_eager` is off are
queued on Redis and evaluated there. Tests using it need committed data
(`transactional_db`).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from ingest.models import BatchReceipt
from opsconsole.celery import app as celery_app

ROOT = Path(__file__).resolve().parent.parent


def session(dbname=None, autocommit=True):
    """A PostgreSQL session of its own, outside Django and its pool (the test database unless named)."""
    s = connection.settings_dict
    return psycopg.connect(dbname=dbname or s["NAME"], host=s["HOST"] or None, port=s["PORT"] or None,
                           user=s["USER"] or None, password=s["PASSWORD"] or None, autocommit=autocommit)


def admin_connection():
    return session("postgres")


def terminate_every_connection() -> int:
    """What a restart or failover does to every client: each session of the test database is ended."""
    with admin_connection() as admin:
        return len(admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [connection.settings_dict["NAME"]],
        ).fetchall())


def database_url_of_tests():
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def wait_until(condition, timeout, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def unevaluated():
    return set(BatchReceipt.objects.filter(evaluated_at__isnull=True).values_list("pk", flat=True))


class Worker:
    def __init__(self, log_path: Path, pool: str, env: dict, args=()):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.name = f"test-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "opsconsole", "worker", "--pool", pool, "--concurrency", "1",
             "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel", "info",
             "--hostname", self.name, *args],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def output(self):
        return self.log_path.read_text(errors="replace")

    def answers(self):
        return bool(celery_app.control.ping(destination=[self.name], timeout=0.5))

    def wait_ready(self, timeout=60):
        if not wait_until(lambda: self.process.poll() is not None or self.answers(), timeout):
            raise AssertionError(f"the worker did not start:\n{self.output()[-3000:]}")
        if self.process.poll() is not None:
            raise AssertionError(f"the worker exited ({self.process.returncode}):\n{self.output()[-3000:]}")

    def kill(self, sig=signal.SIGKILL):
        """The whole worker at once, as the kernel's OOM killer or a lost machine would."""
        os.killpg(self.process.pid, sig)
        self.process.wait(timeout=30)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@pytest.fixture
def celery_worker(transactional_db, tmp_path):
    """A function starting a worker process: `with celery_worker(pool, wait_ready, args, **env) as worker:` (`args`:
    more command-line arguments); tasks are queued on Redis meanwhile."""
    conf = celery_app.conf
    eager = conf.task_always_eager
    conf.task_always_eager = False
    celery_app.control.purge()  # nothing left over from another test's broker traffic
    started = []

    @contextmanager
    def start(pool="solo", wait_ready=True, args=(), **extra_env):
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": database_url_of_tests(),
               "PYTHONPATH": str(ROOT), **{k: str(v) for k, v in extra_env.items()}}
        worker = Worker(tmp_path / f"worker-{len(started)}.log", pool, env, args)
        started.append(worker)
        try:
            if wait_ready:  # a solo worker busy with a task does not answer pings
                worker.wait_ready()
            yield worker
        finally:
            worker.stop()

    yield start
    for worker in started:
        worker.stop()
    conf.task_always_eager = eager


class RedisServer:
    """A throwaway redis-server on a free port of its own, to stop and start as a restart would (never the suite's)."""

    def __init__(self, directory: Path, *args):
        from tests.process_support import free_port

        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = directory
        self.args = args
        self.process = None

    def start(self):
        import redis

        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "", *self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)

        def answers():
            try:
                return client.ping()
            except redis.ConnectionError:
                return False

        if not wait_until(answers, 10):
            raise AssertionError("redis-server did not start")
        client.close()

    def crash(self):
        """Gone at once, as a killed container is: what it had not written to disk is lost."""
        self.process.kill()
        self.process.wait(timeout=10)

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, socket_connect_timeout=1)


def use_broker(url):
    """This test process publishes to (and pings workers on) the broker at `url` from now on."""
    celery_app.conf.broker_url = url
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of the test's own, which this test process publishes to; a function (*args) starting it."""
    if shutil.which("redis-server") is None:
        from tests.conftest import IN_CI

        (pytest.fail if IN_CI else pytest.skip)("needs redis-server (apt-get install redis-server)")
    servers = []
    saved = celery_app.conf.broker_url

    def start(*args):
        server = RedisServer(tmp_path, *args)
        servers.append(server)
        server.start()
        use_broker(server.url)
        return server

    yield start
    use_broker(saved)
    for server in servers:
        if server.process and server.process.poll() is None:
            server.crash()
