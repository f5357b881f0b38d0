"""Settings come from the environment, and a bad value stops the start-up with its name."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start(env_overrides, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    env.update({"DJANGO_SETTINGS_MODULE": "opsconsole.settings", "WL_VAR_DIR": str(tmp_path)}, **env_overrides)
    code = "import django; django.setup(); from django.conf import settings; print(settings.DATABASES['default']['ENGINE'], settings.CELERY_TASK_ALWAYS_EAGER, settings.CHANNEL_LAYERS['default']['BACKEND'])"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_nothing_set_runs_embedded(tmp_path):
    result = start({}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", "True", "channels.layers.InMemoryChannelLayer"]


def test_database_and_redis_urls_switch_to_real_services(tmp_path):
    result = start(
        {"DATABASE_URL": "postgres://u@db.example:5432/wl", "REDIS_URL": "redis://cache:6379/0", "SECRET_KEY": "k", "ALLOWED_HOSTS": "wl.example"},
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["opsconsole.postgresql", "False", "channels_redis.core.RedisChannelLayer"]


def test_sqlite_database_url_with_an_absolute_path_is_accepted(tmp_path):
    result = start({"DATABASE_URL": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": "k", "ALLOWED_HOSTS": "h"}, tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"DEBUG": "0", "ALLOWED_HOSTS": "wl.example"}, "SECRET_KEY"),
        ({"DEBUG": "0", "SECRET_KEY": "k"}, "ALLOWED_HOSTS"),
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({"DATABASE_URL": "mysql://root@localhost/wl", "SECRET_KEY": "k", "ALLOWED_HOSTS": "h"}, "DATABASE_URL"),
        ({"DATABASE_URL": "not a url", "SECRET_KEY": "k", "ALLOWED_HOSTS": "h"}, "DATABASE_URL"),
        ({"REDIS_URL": "http://localhost:6379"}, "REDIS_URL"),
        ({"RUN_STALLED_SECONDS": "ten"}, "RUN_STALLED_SECONDS"),
        ({"EVALUATION_SWEEP_SECONDS": "1"}, "EVALUATION_SWEEP_SECONDS"),
        ({"EVALUATION_PACE_AFTER_MS": "a second"}, "EVALUATION_PACE_AFTER_MS"),
        ({"EVALUATION_PACE_MAX_MS": "-1"}, "EVALUATION_PACE_MAX_MS"),
        ({"EVALUATION_VISIBILITY_TIMEOUT": "an hour"}, "EVALUATION_VISIBILITY_TIMEOUT"),
        ({"LOGIN_FAILURES_PER_USER": "0"}, "LOGIN_FAILURES_PER_USER"),
        ({"DEBUG": "0", "SECRET_KEY": "k", "ALLOWED_HOSTS": "h", "SECURE_HSTS_SECONDS": "a year"}, "SECURE_HSTS_SECONDS"),
        ({"CONSOLE_URL": "console.example"}, "CONSOLE_URL"),
        ({"CONSOLE_URL": "ftp://console.example"}, "CONSOLE_URL"),
        ({"EMAIL_PORT": "smtp"}, "EMAIL_PORT"),
        ({"EMAIL_USE_TLS": "maybe"}, "EMAIL_USE_TLS"),
        ({"EMAIL_BACKEND": "smtp"}, "EMAIL_BACKEND"),
        ({"EMAIL_BACKEND": "no.such.module.EmailBackend"}, "EMAIL_BACKEND"),
    ],
)
def test_bad_values_fail_at_start_up_naming_the_variable(tmp_path, overrides, named):
    result = start(overrides, tmp_path)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert named in result.stderr.splitlines()[-1]
