"""With DEBUG off every page carries a Content-Security-Policy, and https responses HSTS; in debug neither.

Settings are read at start-up, so each case starts the console's settings in
a process of its own (as tests/test_settings_fail_loudly.py does) and asks
for the login page through Django's test client.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASK = """
import json, django
django.setup()
from django.test import Client
headers = {}
for scheme, secure in (("http", False), ("https", True)):
    r = Client().get("/accounts/login/", secure=secure)
    headers[scheme] = {"status": r.status_code, "csp": r.headers.get("Content-Security-Policy"),
                       "hsts": r.headers.get("Strict-Transport-Security")}
print(json.dumps(headers))
"""


def headers(tmp_path, **env_overrides):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    env.update({"DJANGO_SETTINGS_MODULE": "opsconsole.settings", "WL_VAR_DIR": str(tmp_path), "SECRET_KEY": "k",
                "ALLOWED_HOSTS": "testserver"}, **env_overrides)
    result = subprocess.run([sys.executable, "-c", ASK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_with_debug_off_pages_carry_the_policy_and_https_pages_hsts(tmp_path):
    got = headers(tmp_path, DEBUG="0")
    for scheme in ("http", "https"):
        assert got[scheme]["status"] == 200
        policy = dict(d.strip().split(" ", 1) for d in got[scheme]["csp"].split(";"))
        assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'" and policy["object-src"] == "'none'"
        assert policy["frame-ancestors"] == "'none'"
        assert policy["connect-src"] == "'self' ws://testserver wss://testserver"
        assert policy["style-src"].startswith("'self' 'nonce-")
    assert got["https"]["hsts"] == "max-age=31536000"
    assert got["http"]["hsts"] is None  # browsers ignore it over plain http; Django sends it on https only


def test_each_response_has_its_own_nonce(tmp_path):
    first, second = headers(tmp_path, DEBUG="0").values()
    assert first["csp"] != second["csp"]


def test_hsts_settings_come_from_the_environment(tmp_path):
    got = headers(tmp_path, DEBUG="0", SECURE_HSTS_SECONDS="600", SECURE_HSTS_INCLUDE_SUBDOMAINS="1")
    assert got["https"]["hsts"] == "max-age=600; includeSubDomains"


def test_debug_pages_carry_neither(tmp_path):
    got = headers(tmp_path, DEBUG="1")
    assert got["https"] == {"status": 200, "csp": None, "hsts": None}
