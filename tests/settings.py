"""Settings for the test suite: production settings plus the two values a deployment must supply."""
import os

os.environ.setdefault("SECRET_KEY", "tests-only-secret-key")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")

from opsconsole.settings import *  # noqa: E402,F401,F403
