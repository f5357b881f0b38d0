"""Settings for the test suite: production settings plus the two values a deployment must supply."""
import os

os.environ.setdefault("SECRET_KEY", "tests-only-secret-key")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
# The tests' receivers listen on loopback, which a deployment's channels may not reach by default; set in the
# environment so that the workers and servers the tests start inherit it too.
os.environ.setdefault("NOTIFY_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")

# Under pytest-xdist each worker process gets its own Redis database (its own Celery queues, channel groups,
# caches and counts) and its own folder for the embedded console's files, as pytest-django gives it its own
# test database; set in the environment so that the workers and servers a test starts use the same ones.
# Once, in the pytest worker: the processes a test starts inherit the result (and may be given a Redis of their own).
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("WL_TEST_WORKER_SETTINGS") != _worker:
    os.environ["WL_TEST_WORKER_SETTINGS"] = _worker
    _index = int(_worker[2:])
    if os.environ.get("REDIS_URL"):
        from urllib.parse import urlsplit, urlunsplit

        _url = urlsplit(os.environ["REDIS_URL"])
        os.environ["REDIS_URL"] = urlunsplit(_url._replace(path=f"/{10 + _index}"))
    _var = os.environ.get("WL_VAR_DIR") or os.path.join(os.path.dirname(os.path.dirname(__file__)), "var")
    os.environ["WL_VAR_DIR"] = os.path.join(_var, _worker)
    os.makedirs(os.environ["WL_VAR_DIR"], exist_ok=True)

from opsconsole.settings import *  # noqa: E402,F401,F403
