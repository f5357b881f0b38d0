"""Settings for the test suite: production settings plus the two values a deployment must supply."""
import os

os.environ.setdefault("SECRET_KEY", "tests-only-secret-key")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
# The tests' receivers listen on loopback, which a deployment's channels may not reach by default; set in the
# environment so that the workers and servers the tests start inherit it too.
os.environ.setdefault("NOTIFY_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")

from opsconsole.settings import *  # noqa: E402,F401,F403
