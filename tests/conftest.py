"""Shared fixtures: the three users every endpoint is tested with, tokens, an ingest helper.

Markers `postgres` and `redis` need the real services: without DATABASE_URL /
REDIS_URL they are skipped on a laptop, but under CI (CI=true) a missing
service is a failure, never a skip.
"""
import os

import orjson
import pytest
from django.db import connection
from django.test.testcases import QuietWSGIRequestHandler
from rest_framework.test import APIClient

from ingest.models import Project, ProjectToken
from opsconsole.celery import app as celery_app
from opsconsole.models import Membership, Role

# Fixture modules shared by several test files, registered once instead of imported into each.
pytest_plugins = ["tests.browser", "tests.triage_support", "tests.alertmanager_support", "tests.worker_support",
                  "tests.backtest_support", "tests.notify_support", "tests.export_support", "tests.mlflow_support"]

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# Django's live test server writes an answer in several small sends; with Nagle's algorithm on, each answer on a
# kept-alive connection then waits for the client's delayed ACK (~40 ms a request, most of the API fuzzing's time).
# uvicorn, which serves the console, turns Nagle off as well.
QuietWSGIRequestHandler.disable_nagle_algorithm = True
CHROMIUM = "/usr/bin/chromium"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "postgres" in item.keywords and not os.environ.get("DATABASE_URL", "").startswith("postgres"):
            if IN_CI:
                item.add_marker(pytest.mark.usefixtures("_fail_missing_postgres"))
            else:
                item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://…"))
        if "browser" in item.keywords and not os.path.exists(CHROMIUM):
            if IN_CI:
                item.add_marker(pytest.mark.usefixtures("_fail_missing_chromium"))
            else:
                item.add_marker(pytest.mark.skip(reason=f"needs Chromium at {CHROMIUM} (apt-get install chromium)"))
        if "redis" in item.keywords and not os.environ.get("REDIS_URL"):
            if IN_CI:
                item.add_marker(pytest.mark.usefixtures("_fail_missing_redis"))
            else:
                item.add_marker(pytest.mark.skip(reason="needs Redis: set REDIS_URL=redis://…"))


@pytest.fixture
def _fail_missing_postgres():
    pytest.fail("CI must run this test on PostgreSQL, but DATABASE_URL is not a postgres:// URL")


@pytest.fixture
def _fail_missing_chromium():
    pytest.fail(f"CI must run the browser tests, but {CHROMIUM} is missing (bin/test installs Debian's chromium)")


@pytest.fixture
def _fail_missing_redis():
    pytest.fail("CI must run this test against Redis, but REDIS_URL is not set")


@pytest.fixture(autouse=True)
def _fast_and_eager(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Without a worker in the test process, evaluation runs inline (tests that
    # exercise the real broker switch this off themselves).
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = eager


@pytest.fixture(autouse=True)
def _process_state_reset():
    # State that outlives a test: the broker's breaker (a test with Redis down leaves it open), and the
    # login and token throttle's counts (the suite logs in from 127.0.0.1 many times, and sends bad tokens),
    # and Celery's "joins will block" flag, which a worker started in this process (start_worker, solo pool)
    # leaves set, so that a later test's result.get() is refused as if it ran inside a task; and the batches
    # this process evaluated (a flushed database may number its next batches the same), and what it knows of the
    # projects' evaluation backlogs (ingest/pacing.py), for the same reason.
    from celery._state import _set_task_join_will_block

    from alerts.tasks import BROKER, forget_evaluated
    from ingest import pacing
    from opsconsole import throttle

    def reset():
        BROKER.reset()
        throttle.reset()
        _set_task_join_will_block(False)
        forget_evaluated()
        pacing.forget()

    reset()
    yield
    reset()


@pytest.fixture
def project(db):
    return Project.objects.create(slug="pretrain", name="Pretrain", owner_name="Pretrain on-call", owner_contact="#pretrain-oncall")


@pytest.fixture
def other_project(db):
    return Project.objects.create(slug="vision", name="Vision")


@pytest.fixture
def token(project):
    return ProjectToken.issue(project)[1]


@pytest.fixture
def other_token(other_project):
    return ProjectToken.issue(other_project)[1]


@pytest.fixture
def owner(django_user_model, project):
    user = django_user_model.objects.create_user("olivia", password="pw-olivia")
    Membership.objects.create(user=user, project=project, role=Role.RULE_ADMIN)
    return user


@pytest.fixture
def teammate(django_user_model, project):
    user = django_user_model.objects.create_user("tariq", password="pw-tariq")
    Membership.objects.create(user=user, project=project, role=Role.VIEWER)
    return user


@pytest.fixture
def outsider(django_user_model, other_project):
    user = django_user_model.objects.create_user("oscar", password="pw-oscar")
    Membership.objects.create(user=user, project=other_project, role=Role.ONCALL)
    return user


@pytest.fixture
def api():
    return APIClient()


class Sender:
    """Posts to the ingest endpoint as a job would, with after-commit work executed."""

    def __init__(self, client, token, capture):
        self.client = client
        self.token = token
        self.capture = capture

    def post(self, body, content_type="application/json", token=None, headers=None):
        if isinstance(body, (dict, list)):
            body = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        elif isinstance(body, str):
            body = body.encode()
        extra = {}
        auth = self.token if token is None else token
        if auth:
            extra["HTTP_AUTHORIZATION"] = f"Bearer {auth}"
        for key, value in (headers or {}).items():
            extra["HTTP_" + key.upper().replace("-", "_")] = value
        with self.capture(execute=True):
            return self.client.generic("POST", "/api/v1/ingest", body, content_type=content_type, **extra)

    def get(self, path, **params):
        return self.client.get(path, params, HTTP_AUTHORIZATION=f"Bearer {self.token}")


@pytest.fixture
def sender(token, django_capture_on_commit_callbacks):
    return Sender(APIClient(), token, django_capture_on_commit_callbacks)


def stored_counts():
    """How much telemetry the database holds (to prove a rejected request stored nothing)."""
    from ingest.models import BatchReceipt, Block, Event, Phase, Run, Series

    return {m.__name__: m.objects.count() for m in (Run, Series, Block, Phase, Event, BatchReceipt)}


@pytest.fixture
def vendor():
    return connection.vendor


@pytest.fixture(autouse=True)
def _sqlite_flush_passes_the_decision_log(request):
    """On SQLite, a transactional test's reset empties tables with DELETE, which the decision log's triggers refuse.

    PostgreSQL resets with TRUNCATE, which is not a row change, so there the triggers stay. On SQLite they
    are dropped just before the reset (this fixture is set up after transactional_db, so it is torn down
    before it) and put back for the next test.
    """
    if not ({"transactional_db", "live_server"} & set(request.fixturenames)) or connection.vendor != "sqlite":
        yield
        return
    request.getfixturevalue("transactional_db")
    from importlib import import_module

    triggers = import_module("reviews.migrations.0002_decision_log_append_only")
    with connection.cursor() as cursor:
        for sql in triggers.SQLITE_UP:
            cursor.execute(sql)
    yield
    with connection.cursor() as cursor:
        for sql in triggers.SQLITE_DOWN:
            cursor.execute(sql)
