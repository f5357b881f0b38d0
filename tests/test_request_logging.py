"""A refused request is logged once, with debug on or off (Django's own console handler must not repeat the root's)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

REQUESTS = """
import django
django.setup()
from django.test import Client
client = Client()
client.get("/no-such-page/")
client.get("/api/v1/runs/")
"""


@pytest.mark.parametrize("debug", ["1", "0"])
def test_each_refused_request_is_logged_once(tmp_path, debug):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "LOG_LEVEL"}}
    env.update(DJANGO_SETTINGS_MODULE="opsconsole.settings", DEBUG=debug, SECRET_KEY="logging-test", ALLOWED_HOSTS="testserver",
               WL_VAR_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", REQUESTS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines.count("Not Found: /no-such-page/") == 1, done.stderr
    assert lines.count("Unauthorized: /api/v1/runs/") == 1, done.stderr
