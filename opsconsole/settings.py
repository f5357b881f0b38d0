"""Settings for Warning Light.

With no environment set it runs embedded: SQLite under var/, Celery tasks run
eagerly in the web process, the in-memory channel layer. DATABASE_URL and
REDIS_URL switch to PostgreSQL and Redis, which is how it runs in production.
"""
import importlib.util
import ipaddress
from pathlib import Path

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from opsconsole.env import database_from_url, env_bool, env_int, env_list, env_str, env_url, redis_url, sqlite_options

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("WL_VAR_DIR", str(BASE_DIR / "var")))

DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = redis_url("REDIS_URL")

# Embedded mode (no DATABASE_URL) is the newcomer's laptop: debug on unless told
# otherwise. A deployment with a real database is production: debug off by default.
DEBUG = env_bool("DEBUG", default=DATABASE_URL is None)

SECRET_KEY = env_str("SECRET_KEY")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS")
if not DEBUG:
    if not SECRET_KEY:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS must be set when DEBUG is off (comma-separated host names)")
else:
    SECRET_KEY = SECRET_KEY or "dev-insecure-warning-light-key-do-not-use-in-production"
    ALLOWED_HOSTS = ALLOWED_HOSTS or ["127.0.0.1", "localhost", "[::1]", "testserver"]
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "opsconsole",
    "ingest",
    "alerts",
    "runs",
    "reviews",
    "audit",
    "notifications",
    "exports",
    "retention",
]

MIDDLEWARE = [
    # /healthz, /readyz and /metrics, answered before the host check (probes ask by the pod's address).
    "opsconsole.probes.ProbesMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # NUL in the URL, oversized bodies and Content-Encoding, before anything reads them.
    "opsconsole.request_guard.request_guard",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "opsconsole.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
WSGI_APPLICATION = "opsconsole.wsgi.application"
ASGI_APPLICATION = "opsconsole.asgi.application"

if DATABASE_URL:
    DATABASES = {"default": database_from_url("DATABASE_URL", DATABASE_URL)}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "warninglight.sqlite3",
            "OPTIONS": sqlite_options(),
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Connections of the pool (DATABASE_POOL_SIZE, per process) that reads cannot take: read-only requests and
# export chunks hold at most the rest at once, so ingest and other writes always find one (opsconsole/db.py).
_POOL_SIZE = DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("max_size")
DATABASE_POOL_RESERVE = env_int("DATABASE_POOL_RESERVE", min(max(1, _POOL_SIZE // 3), _POOL_SIZE - 1) if _POOL_SIZE else 0, minimum=0)
if _POOL_SIZE and DATABASE_POOL_RESERVE >= _POOL_SIZE:
    raise ImproperlyConfigured(f"DATABASE_POOL_RESERVE={DATABASE_POOL_RESERVE} must be less than DATABASE_POOL_SIZE={_POOL_SIZE}: "
                               "reads need one connection at least")
# JSON Lines exports streaming at once, per project and per token or account; beyond, 429 (exports/limits.py).
EXPORT_MAX_CONCURRENT_PER_PROJECT = env_int("EXPORT_MAX_CONCURRENT_PER_PROJECT", 2, minimum=1)
EXPORT_MAX_CONCURRENT_PER_TOKEN = env_int("EXPORT_MAX_CONCURRENT_PER_TOKEN", 1, minimum=1)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:runs"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# plotly.js is vendored under static/vendor/plotly/ (bin/vendor-plotly) and served by us: the console runs offline, no CDN.
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
try:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start without it
except OSError:
    pass
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# Files a browser asks for at the site's root (favicon.ico), served offline like the rest.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"
WHITENOISE_AUTOREFRESH = DEBUG

# The ingest view enforces the contract's 4 MiB limit itself (413 with a clear
# message), so Django's own smaller limit must not answer first.
DATA_UPLOAD_MAX_MEMORY_SIZE = None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "ingest.auth.PersonalTokenAuthentication",
        "ingest.auth.ProjectTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "opsconsole.request_guard.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "opsconsole.rest.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Warning Light API",
    "DESCRIPTION": "Ingest contract v1 and the read API of the Warning Light console.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Two choice sets are both called `state` (an alert's, a rule's evaluation health): name each.
    "ENUM_NAME_OVERRIDES": {"AlertStateEnum": ["firing", "acknowledged", "resolved", "muted"], "RuleHealthStateEnum": ["ok", "broken", "recovered"],
                            # a delivery-log row's status beside a run's (which keeps its name)
                            "DeliveryStatusEnum": "notifications.models.DeliveryStatus", "StatusEnum": "ingest.models.RunStatus"},
    # Every operation lists the 4xx the request guard and authentication answer everywhere.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "opsconsole.schema.add_common_responses"],
}

# Celery: eager without Redis, so the embedded console evaluates batches in-process.
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = REDIS_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True  # a task lost with its worker is redelivered, not dropped
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker and beat retry a lost broker every second (opsconsole/celery.py) for as long as it takes: a limit would
# end them during an outage of a few minutes.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Tasks are acknowledged after they ran (acks_late): a worker killed mid-task (kill -9, OOM, a lost
# host) leaves its message unacknowledged on Redis, which delivers it again after this timeout
# (Redis transport default: an hour). It must exceed the longest evaluation, or a slow one is
# delivered twice (harmless: the second finds the batch claimed and does nothing).
EVALUATION_VISIBILITY_TIMEOUT = env_int("EVALUATION_VISIBILITY_TIMEOUT", 300, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Publishing (ingest, the sweep) tries the broker once instead of retrying for the connection
    # timeout: with Redis down an ingest answers at once and ingest.service's breaker skips the broker
    # for a while. The worker's own consumer connection keeps retrying (broker_connection_max_retries).
    "max_retries": 0,
    "socket_connect_timeout": CELERY_BROKER_CONNECTION_TIMEOUT,
    "visibility_timeout": EVALUATION_VISIBILITY_TIMEOUT,
    # Workers look for such messages every few seconds (default: every 100 s).
    "unacked_restore_interval": max(1, min(10, EVALUATION_VISIBILITY_TIMEOUT // 3)),
    "unacked_restore_throttle": 1,
}
# Celery closes Django's connections around every task unless told to reuse them;
# a worker evaluating a batch every few milliseconds would reconnect each time. The
# connection kept is checked before each task instead (opsconsole/celery.py).
CELERY_DB_REUSE_MAX = 1000
# A delivery waits on someone else's server (up to NOTIFY_TIMEOUT_SECONDS a try); on the worker processes that
# evaluate batches, two slow receivers held another project's NaN alert for a minute. Deliveries have a queue of
# their own, consumed by worker processes of their own (docker-compose.yml: `-Q celery` evaluates, `-Q
# notifications` delivers), so evaluation never waits on a receiver. A worker started without -Q consumes every queue:
# one process serving everything, as in the tests and the smallest deployments, still delivers.
# Backtests likewise (up to BACKTEST_MAX_SECONDS of replay each): `-Q backtests`, so a rule admin's backtest never
# holds an evaluation.
NOTIFICATIONS_QUEUE = "notifications"
BACKTESTS_QUEUE = "backtests"
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = [Queue(name, Exchange(name), routing_key=name)
                      for name in (CELERY_TASK_DEFAULT_QUEUE, NOTIFICATIONS_QUEUE, BACKTESTS_QUEUE)]
CELERY_TASK_ROUTES = {
    "notifications.tasks.deliver": {"queue": NOTIFICATIONS_QUEUE},
    "notifications.tasks.refresh": {"queue": NOTIFICATIONS_QUEUE},
    "alerts.tasks.run_backtest": {"queue": BACKTESTS_QUEUE},
    # Deleting a run and applying retention are long chunked jobs too: never ahead of an evaluation.
    "retention.tasks.delete_run": {"queue": BACKTESTS_QUEUE},
    "retention.tasks.prune": {"queue": BACKTESTS_QUEUE},
}
EVALUATION_SWEEP_SECONDS = env_int("EVALUATION_SWEEP_SECONDS", 60, minimum=5)
# A run's waiting batches are judged together, up to these bounds (alerts/batches.py): judging costs about the
# same per series whatever its points, so a backlog clears faster the longer it is. 1 judges one batch at a time.
EVALUATION_BATCHES_AT_ONCE = env_int("EVALUATION_BATCHES_AT_ONCE", 50, minimum=1)
EVALUATION_POINTS_AT_ONCE = env_int("EVALUATION_POINTS_AT_ONCE", 250_000, minimum=1)
# A batch is queued once: ingest marks it queued as it hands it over (BatchReceipt.queued_at), and the sweeps take
# only batches nobody holds (alerts/tasks.py queue_unheld). A mark older than this means the message was lost (a
# task that failed, a message the broker dropped): the batch is queued again. Above the visibility timeout, so that
# Redis redelivers a dead worker's message before the sweep queues the batch a second time.
EVALUATION_REQUEUE_SECONDS = env_int("EVALUATION_REQUEUE_SECONDS", max(600, 2 * EVALUATION_VISIBILITY_TIMEOUT),
                                     minimum=EVALUATION_VISIBILITY_TIMEOUT + 1)
# How soon batches the broker lost or never got are queued after it is back: a light sweep of batches nobody
# holds (one indexed query and one Redis command), which also finds a Redis that came back empty.
EVALUATION_RECOVERY_SECONDS = env_int("EVALUATION_RECOVERY_SECONDS", 2, minimum=1)
# Ingest yields to evaluation (ingest/pacing.py): while a project's oldest batch not yet judged is older than
# this, its ingest answers are held back by the excess, at most EVALUATION_PACE_MAX_MS each. 0 turns it off.
EVALUATION_PACE_AFTER_MS = env_int("EVALUATION_PACE_AFTER_MS", 1000, minimum=0)
EVALUATION_PACE_MAX_MS = env_int("EVALUATION_PACE_MAX_MS", 1000, minimum=0)
NOTIFY_SWEEP_SECONDS = env_int("NOTIFY_SWEEP_SECONDS", 60, minimum=5)
# Retention (retention/prune.py) deletes at most this many rows a transaction, each its own short transaction,
# so a prune or a deleted run holds no lock ingest waits on for long (benchmarks/delete_run.py measures it).
RETENTION_CHUNK_ROWS = env_int("RETENTION_CHUNK_ROWS", 5000, minimum=100)
CELERY_BEAT_SCHEDULE = {
    # Each project's retention policy, applied hourly (retention/tasks.py; idempotent, so a missed hour is caught up).
    "apply-retention": {
        "task": "retention.tasks.prune",
        "schedule": crontab(minute=41),
    },
    "queue-unevaluated-batches": {
        "task": "alerts.tasks.queue_unevaluated",
        "schedule": float(EVALUATION_RECOVERY_SECONDS),
        # Behind a backlog on the queue, a late one is dropped: the next is on its way.
        "options": {"expires": float(EVALUATION_RECOVERY_SECONDS)},
    },
    "sweep-unevaluated-batches": {
        "task": "alerts.tasks.sweep_unevaluated",
        "schedule": float(EVALUATION_SWEEP_SECONDS),
    },
    "open-due-reviews": {
        "task": "reviews.tasks.open_due_reviews",
        "schedule": float(EVALUATION_SWEEP_SECONDS),
    },
    # The rule audit (audit/tasks.py): diagnostic links checked hourly, each owner's report on Monday morning (UTC).
    "check-diagnostic-links": {
        "task": "audit.tasks.check_diagnostic_links",
        "schedule": crontab(minute=17),
    },
    # Notifications whose next try is due (retries, and any whose queueing was lost), stuck claims, and
    # Alertmanager pushes of firing incidents renewed before Alertmanager would resolve them (notifications/tasks.py).
    "notification-sweep": {
        "task": "notifications.tasks.sweep",
        "schedule": float(NOTIFY_SWEEP_SECONDS),
    },
    "weekly-rule-reports": {
        "task": "audit.tasks.send_weekly_reports",
        "schedule": crontab(minute=0, hour=7, day_of_week="mon"),
    },
}

# Without Redis there is no beat process: the serving process runs the schedule above itself (opsconsole/beat.py,
# started by the ASGI lifespan). Off (0): nothing periodic runs, and Alertmanager channels say so on their page.
EMBEDDED_BEAT = env_bool("EMBEDDED_BEAT", True)

# Mail (the weekly rule reports): printed to the console unless the environment names an SMTP server.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
def _module_exists(name):
    try:
        return bool(name) and importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package is missing
        return False


_EMAIL_MODULE, _, _EMAIL_CLASS = EMAIL_BACKEND.rpartition(".")
if not _EMAIL_CLASS or not _module_exists(_EMAIL_MODULE):
    # Otherwise the first weekly report would fail, days after a deployment.
    raise ImproperlyConfigured(f"EMAIL_BACKEND={EMAIL_BACKEND!r}: expected a backend's dotted path, e.g. "
                               "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "warning-light@localhost")
# How long a diagnostic link may take to answer before the audit calls it down.
LINK_CHECK_TIMEOUT_SECONDS = env_int("LINK_CHECK_TIMEOUT_SECONDS", 5, minimum=1)

# redis-py's default read timeout (5 s) equals channels_redis's blocking receive (5 s):
# an idle websocket's receive would time out and drop the socket every few seconds.
CHANNEL_REDIS_OPTIONS = {"socket_timeout": 30, "socket_connect_timeout": 2}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, **CHANNEL_REDIS_OPTIONS}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Where people reach this console: starter rules link to its runbook pages from here.
CONSOLE_URL = env_url("CONSOLE_URL", "http://127.0.0.1:8000")

# Notifications (notifications/): an incident's updates to one channel at most once per this many minutes
# (0: every update); tries per message before it fails; seconds before the first retry (doubling each time);
# seconds one try may take; how often a firing incident is pushed again to an Alertmanager.
NOTIFY_REPEAT_MINUTES = env_int("NOTIFY_REPEAT_MINUTES", 30, minimum=0)
NOTIFY_MAX_TRIES = env_int("NOTIFY_MAX_TRIES", 5, minimum=1)
NOTIFY_RETRY_SECONDS = env_int("NOTIFY_RETRY_SECONDS", 30, minimum=1)
NOTIFY_TIMEOUT_SECONDS = env_int("NOTIFY_TIMEOUT_SECONDS", 5, minimum=1)
NOTIFY_ALERTMANAGER_REFRESH_SECONDS = env_int("NOTIFY_ALERTMANAGER_REFRESH_SECONDS", 120, minimum=10)
# Tries of one project's messages in flight at once, on every notifications worker together: one project's slow
# receivers never take the whole pool. A try beyond it waits a few seconds and asks again.
NOTIFY_MAX_INFLIGHT_PER_PROJECT = env_int("NOTIFY_MAX_INFLIGHT_PER_PROJECT", 4, minimum=1)

# Backtests (alerts/backtest_jobs.py) run as tasks: each stops after this many seconds of replay or points
# judged (the result says how far it got), and a project has at most this many queued or running at once.
BACKTEST_MAX_SECONDS = env_int("BACKTEST_MAX_SECONDS", 20, minimum=1)
BACKTEST_MAX_POINTS = env_int("BACKTEST_MAX_POINTS", 2_000_000, minimum=1)
BACKTEST_MAX_PER_PROJECT = env_int("BACKTEST_MAX_PER_PROJECT", 2, minimum=1)


def _networks(name):
    """Comma-separated CIDRs (an address alone is its /32 or /128); a typo stops the start-up."""
    networks = []
    for item in env_list(name):
        try:
            networks.append(ipaddress.ip_network(item))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network ({exc}); expected CIDRs such as "
                                       "10.20.0.0/16,fd12::/64") from None
    return tuple(networks)


# Networks a channel may send to although they are loopback, private, link-local or unique-local, all refused
# by default (notifications/destinations.py): e.g. the site's own Alertmanager at 10.20.0.0/16. Empty: none.
NOTIFY_ALLOWED_NETWORKS = _networks("NOTIFY_ALLOWED_NETWORKS")

# A run with no new data for this long is shown as stalled.
RUN_STALLED_SECONDS = env_int("RUN_STALLED_SECONDS", 600, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # Eager mode logs every task at INFO; that is noise in the web process.
        "celery": {"level": "WARNING"},
        # Django's defaults give "django" its own console handler in debug; it also
        # propagates to the root's, so every 4xx would be written twice.
        "django": {"handlers": [], "level": "INFO"},
    },
}

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)

# --- Failing infrastructure and security (issue 9) ---------------------------------------------------
# Last: its process_view runs the view itself, once more when the database connection was lost (GET only).
MIDDLEWARE.append("opsconsole.db.RetryReadsMiddleware")
# Content-Security-Policy when DEBUG is off (checked per response, so tests can switch DEBUG).
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1, "opsconsole.security.ContentSecurityPolicyMiddleware")
if not DEBUG:
    # HSTS, sent by SecurityMiddleware on https responses (behind a TLS proxy: uvicorn --proxy-headers).
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)

# Failed logins and bad API tokens are throttled (opsconsole/throttle.py): after this many failures
# within the window, the key is refused with 429 and Retry-After until the window ends.
AUTH_FAILURE_WINDOW_SECONDS = env_int("AUTH_FAILURE_WINDOW_SECONDS", 900, minimum=1)
LOGIN_FAILURES_PER_USER = env_int("LOGIN_FAILURES_PER_USER", 10, minimum=1)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 50, minimum=1)
TOKEN_FAILURES_PER_TOKEN = env_int("TOKEN_FAILURES_PER_TOKEN", 10, minimum=1)
TOKEN_FAILURES_PER_ADDRESS = env_int("TOKEN_FAILURES_PER_ADDRESS", 20, minimum=1)
# The counts live in the cache: Redis when there is one, so every web process shares them.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "wl",
            # Fail fast when Redis is down; the throttle then lets requests through (and says so).
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "warninglight"}}

# --- The console's own health (issue 24): /metrics, /healthz, /readyz, the access log ------------------------
# /metrics (opsconsole/probes.py) is open unless METRICS_TOKEN is set; then it needs `Authorization: Bearer <it>`.
METRICS_TOKEN = env_str("METRICS_TOKEN", "") or None
if METRICS_TOKEN is not None and (len(METRICS_TOKEN) < 16 or METRICS_TOKEN != METRICS_TOKEN.strip() or " " in METRICS_TOKEN):
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters without spaces (e.g. the output of "
                               "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`), or unset")
# Counts only, by default: on, the ingest, evaluation, delivery and backlog series get a `project` label (the slug).
METRICS_LABELS_WITH_PROJECTS = env_bool("METRICS_LABELS_WITH_PROJECTS", False)
# How long /readyz waits for the database and for the broker, each.
READY_TIMEOUT_SECONDS = env_int("READY_TIMEOUT_SECONDS", 2, minimum=1)
# One line per request on the `opsconsole.access` logger (opsconsole/access_log.py); the probes' and Prometheus'
# own requests only with ACCESS_LOG_PROBES.
ACCESS_LOG = env_bool("ACCESS_LOG", True)
ACCESS_LOG_PROBES = env_bool("ACCESS_LOG_PROBES", False)
# Its own level: a LOG_LEVEL=WARNING for the rest must not silence the access log that ACCESS_LOG asks for.
LOGGING["loggers"]["opsconsole.access"] = {"level": "INFO"}
