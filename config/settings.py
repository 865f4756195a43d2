"""One settings module, driven by the environment.

Zero-setup default: SQLite under var/, tasks run in-process, blobs on the filesystem.
Scale-out: DATABASE_URL (PostgreSQL), CELERY_BROKER_URL (Redis/RabbitMQ), REPLAY_S3_BUCKET.
Production: DJANGO_DEBUG=0 requires DJANGO_SECRET_KEY and REPLAY_KEY_ENCRYPTION_KEY from the
environment (or *_FILE); nothing secret is ever read from the repository.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import dj_database_url
from csp import constants as csp_constants
from django.core.exceptions import ImproperlyConfigured

from console.env import (
    env_bool,
    env_int,
    env_list,
    env_secret,
    env_str,
    parse_trusted_proxies,
)
from console.files import private_dir, private_file, private_sqlite, private_write
from core.replay.retention import policy_from_setting as _retention_policy

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = private_dir(Path(env_str("REPLAY_VAR_DIR", str(BASE_DIR / "var"))))

DEBUG = env_bool("DJANGO_DEBUG", True)


def _local_secret(name: str, env_name: str) -> str:
    """A secret from the environment; in DEBUG only, a random one kept under var/.

    The development fallback is generated on first use on this machine, never committed.
    """
    value = env_secret(env_name)
    if value:
        return value
    if not DEBUG:
        raise ImproperlyConfigured(f"{env_name} (or {env_name}_FILE) must be set when DEBUG is off")
    path = VAR_DIR / f".{name}"
    if not path.exists():
        private_write(path, secrets.token_urlsafe(48))
    return private_file(path).read_text().strip()


SECRET_KEY = _local_secret("secret_key", "DJANGO_SECRET_KEY")
# Encrypts HMAC verification secrets at rest (replay.keys); any string, stretched with SHA-256.
REPLAY_KEY_ENCRYPTION_KEY = _local_secret("key_encryption_key", "REPLAY_KEY_ENCRYPTION_KEY")

# Personal data (privacy/): the key every subject key is wrapped under, and the secret of
# the subjects' lookup digests (HMAC); each derived from REPLAY_KEY_ENCRYPTION_KEY (under its
# own label) unless set. Lose the master key and every personal value is lost.
PRIVACY_MASTER_KEY = env_secret("REPLAY_PRIVACY_MASTER_KEY") or (
    "derived:" + REPLAY_KEY_ENCRYPTION_KEY
)
PRIVACY_SECRET = env_secret("REPLAY_PRIVACY_SECRET") or ("derived:" + REPLAY_KEY_ENCRYPTION_KEY)
# Native traces: where an event payload names its subject when the privacy snapshot has no
# "subject" (docs/formats.md); other formats: {"<format>": {"subject": [...], "personal":
# [...]}}, JSON pointers over the document ("*" matches any key or index).
PRIVACY_SUBJECT_POINTERS = env_list("REPLAY_PRIVACY_SUBJECT_POINTERS", ["/user/email"])
PRIVACY_PATH_RULES = json.loads(env_str("REPLAY_PRIVACY_PATH_RULES", "{}") or "{}")

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "template_partials",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "axes",  # sign-in throttling (console.signin)
    "replay",
    "governance",
    "console",
    "privacy",
    "dsr",  # issue 14 D1
    "otel",  # OpenTelemetry GenAI traces over OTLP/HTTP (otel/conf.py documents its settings)
]

MIDDLEWARE = [
    "console.requestlog.RequestIdMiddleware",
    "console.security.ContentSecurityPolicyMiddleware",  # django-csp's
    "console.views.errors.ErrorPagesMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # static files without runserver: compressed, cache-busted names, far-future caching
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "console.security.NoStoreMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "console.security.SecondFactorMiddleware",
    "console.uploads.UploadLimitMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last, as django-axes asks; the sign-in view renders its own lock-out answer
    "axes.middleware.AxesMiddleware",
]

# The Content-Security-Policy (django-csp): no inline script or style at all; scripts load
# from our own origin and carry the per-request nonce (request.csp_nonce, read by the
# console.security.csp_nonce context processor for `{% htmx_script %}` and our own scripts),
# styles come only from static files. A response that draws no script names no nonce.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [csp_constants.SELF],
        "script-src": [csp_constants.SELF, csp_constants.NONCE],
        "style-src": [csp_constants.SELF],
        "img-src": [csp_constants.SELF, "data:"],
        "object-src": [csp_constants.NONE],
        "base-uri": [csp_constants.NONE],
        "frame-ancestors": [csp_constants.NONE],
        "form-action": [csp_constants.SELF],
    }
}

ROOT_URLCONF = "config.urls"
# DEBUG's 500 page is the console's too (console/views/errors.py): Django's needs inline styles
DEFAULT_EXCEPTION_REPORTER = "console.views.errors.ConsoleExceptionReporter"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "OPTIONS": {
            # the project's templates, the apps', then each trace format's own, from its
            # package (console.template_loaders: "formats/<name>/<path>"); cached, inside
            # django-template-partials' loader, as that app would set them up itself
            "loaders": [
                (
                    "template_partials.loader.Loader",
                    [
                        (
                            "django.template.loaders.cached.Loader",
                            [
                                "django.template.loaders.filesystem.Loader",
                                "django.template.loaders.app_directories.Loader",
                                "console.template_loaders.FormatTemplates",
                            ],
                        )
                    ],
                )
            ],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.security.csp_nonce",
                "console.context_processors.console",
            ],
            "builtins": ["template_partials.templatetags.partials"],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    if str(DATABASES["default"]["NAME"]) not in ("", ":memory:"):
        # created owner-only before SQLite opens it; its -wal and -shm inherit the mode
        private_sqlite(Path(DATABASES["default"]["NAME"]))
    # WAL lets readers proceed during an append; the timeout serialises writers politely.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# collectstatic writes here; WhiteNoise serves it. Owner-only like the rest of var/: the
# console's processes run as one user, and nothing else needs to read it.
STATIC_ROOT = private_dir(VAR_DIR / "staticfiles")

# --- e-mail: the people a new governed request waits for are told (governance.requests.notify)
# The console backend (written to the process's output) unless a deployment names another
# (django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST, EMAIL_PORT ...).
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "replay-console@localhost")
#: where the console is reached, for the links in its e-mails
REPLAY_BASE_URL = env_str("REPLAY_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "trace-list"
LOGOUT_REDIRECT_URL = "login"

# --- storage: content-addressed trace blobs ---------------------------------------------
REPLAY_S3_BUCKET = env_str("REPLAY_S3_BUCKET")


def _s3_storage(access_key_env: str, secret_env: str) -> dict:
    """The blob bucket with one identity's keys (unset: boto3's own chain, e.g. AWS_*)."""
    return {
        "BACKEND": "console.blobstore.AppendOnlyS3Storage",
        "OPTIONS": {
            "bucket_name": REPLAY_S3_BUCKET,
            "endpoint_url": env_str("REPLAY_S3_ENDPOINT_URL") or None,
            "region_name": env_str("REPLAY_S3_REGION") or None,
            "access_key": env_str(access_key_env) or None,
            "secret_key": env_secret(secret_env) or None,
            "addressing_style": env_str("REPLAY_S3_ADDRESSING_STYLE") or None,
            "file_overwrite": False,
        },
    }


_retention_storage: dict | None = None
if REPLAY_S3_BUCKET:
    _blob_storage = _s3_storage("REPLAY_S3_ACCESS_KEY_ID", "REPLAY_S3_SECRET_ACCESS_KEY")
    # the identity that may delete the bytes of expired traces (the worker's, not the web's)
    if env_str("REPLAY_S3_RETENTION_ACCESS_KEY_ID"):
        _retention_storage = _s3_storage(
            "REPLAY_S3_RETENTION_ACCESS_KEY_ID", "REPLAY_S3_RETENTION_SECRET_ACCESS_KEY"
        )
else:
    _blob_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(VAR_DIR / "blobs")},
    }
# blobs (and anything else saved through a filesystem storage) are owner-only
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(VAR_DIR / "media")},
    },
    "blobs": _blob_storage,
    # DEBUG serves the files as they are; production serves what collectstatic wrote:
    # gzip-compressed copies and content-hashed names (cache-busted, cached for a year)
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
if _retention_storage is not None:  # retention deletes with these keys (replay.expiry)
    STORAGES["blobs_retention"] = _retention_storage

# --- AHD sidecars: the checkout whose token and brief files an uploaded sidecar is re-hashed
# against (unset: the report says it cannot be; in development, replay/demo_ahd/)
REPLAY_AHD_ROOT = env_str("REPLAY_AHD_ROOT") or (
    str(BASE_DIR / "replay" / "demo_ahd") if DEBUG else ""
)
# the largest token or brief file re-hashed (a larger one is reported, not read)
REPLAY_AHD_MAX_INPUT_BYTES = env_int("REPLAY_AHD_MAX_INPUT_BYTES", 64 * 1024**2)
# one archive of AHD inputs (docs/formats.md): compressed size, uncompressed total, entries,
# expansion ratio
REPLAY_AHD_MAX_ARCHIVE_BYTES = env_int("REPLAY_AHD_MAX_ARCHIVE_BYTES", REPLAY_AHD_MAX_INPUT_BYTES)
REPLAY_AHD_ARCHIVE_MAX_TOTAL_BYTES = env_int(
    "REPLAY_AHD_ARCHIVE_MAX_TOTAL_BYTES", 2 * REPLAY_AHD_MAX_INPUT_BYTES
)
REPLAY_AHD_ARCHIVE_MAX_ENTRIES = env_int("REPLAY_AHD_ARCHIVE_MAX_ENTRIES", 256)
REPLAY_AHD_ARCHIVE_MAX_RATIO = env_int("REPLAY_AHD_ARCHIVE_MAX_RATIO", 200)

# --- Paxman capabilities a deployment adds to the built-ins (JSON: id -> version or list of
# versions); installed packages add theirs through replay_console.paxman_capabilities
try:
    REPLAY_PAXMAN_CAPABILITIES = json.loads(env_str("REPLAY_PAXMAN_CAPABILITIES") or "{}")
except ValueError as exc:
    raise ImproperlyConfigured(f"REPLAY_PAXMAN_CAPABILITIES is not JSON: {exc}") from None
if not isinstance(REPLAY_PAXMAN_CAPABILITIES, dict):
    raise ImproperlyConfigured("REPLAY_PAXMAN_CAPABILITIES must be a JSON object")

# --- limits on what an upload may be ------------------------------------------------------
REPLAY_MAX_UPLOAD_BYTES = env_int("REPLAY_MAX_UPLOAD_BYTES", 2 * 1024**3)
# what reading one upload may cost (core/formats/native/trace.py Limits; refused with the limit)
REPLAY_MAX_DECOMPRESSED_BYTES = env_int("REPLAY_MAX_DECOMPRESSED_BYTES", 8 * 1024**3)
REPLAY_MAX_GZIP_RATIO = env_int("REPLAY_MAX_GZIP_RATIO", 200)
REPLAY_GZIP_RATIO_FLOOR_BYTES = env_int("REPLAY_GZIP_RATIO_FLOOR_BYTES", 32 * 1024**2)
REPLAY_MAX_BLANK_LINES = env_int("REPLAY_MAX_BLANK_LINES", 1024)
REPLAY_MAX_JSON_KEYS = env_int("REPLAY_MAX_JSON_KEYS", 1_000_000)
REPLAY_MAX_OBJECT_KEYS = env_int("REPLAY_MAX_OBJECT_KEYS", 100_000)
# what one page may read of a stored file (the trace, event and diff pages)
REPLAY_PAGE_READ_BYTES = env_int("REPLAY_PAGE_READ_BYTES", 64 * 1024**2)
# up to how many records a page builds a missing trace index itself (larger: in the background)
REPLAY_INDEX_INLINE_RECORDS = env_int("REPLAY_INDEX_INLINE_RECORDS", 5000)
REPLAY_PAGE_PARSE_BYTES = env_int("REPLAY_PAGE_PARSE_BYTES", 8 * 1024**2)
# caps on one native trace's verification or replay (replay/conf.py replay_limits): past
# either, it ends with REPLAY_TIMEOUT; 0 iterations (the default) is no iteration cap
REPLAY_MAX_SECONDS = float(env_int("REPLAY_MAX_SECONDS", 3600))
REPLAY_MAX_ITERATIONS = env_int("REPLAY_MAX_ITERATIONS", 0) or None
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024**2
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024**2

# --- tasks ---------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
# Where queued replays run (replay/background.py): "celery" on the broker's workers, "thread"
# in a small pool inside the web process (the embedded default: the request returns at once
# and the progress page shows the run), "eager" inline (the test overlay).
REPLAY_TASK_RUNNER = env_str("REPLAY_TASK_RUNNER", "celery" if CELERY_BROKER_URL else "thread")
if REPLAY_TASK_RUNNER not in ("celery", "thread", "eager"):
    raise ImproperlyConfigured(
        f"REPLAY_TASK_RUNNER={REPLAY_TASK_RUNNER!r}: use celery, thread or eager"
    )
if REPLAY_TASK_RUNNER == "celery" and not CELERY_BROKER_URL:
    raise ImproperlyConfigured("REPLAY_TASK_RUNNER=celery needs CELERY_BROKER_URL")
REPLAY_TASK_THREADS = env_int("REPLAY_TASK_THREADS", 2)
# a replay still queued this long after it was (last) queued lost its task (the process that
# held it stopped, the broker was down): its page says so and offers to queue it again
REPLAY_STALE_SECONDS = env_int("REPLAY_STALE_SECONDS", 900)
# no broker: a serving process runs CELERY_BEAT_SCHEDULE itself (replay/background.py)
REPLAY_PERIODIC_IN_PROCESS = env_bool("REPLAY_PERIODIC_IN_PROCESS", True)
CELERY_TASK_ALWAYS_EAGER = REPLAY_TASK_RUNNER == "eager"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# workers log through LOGGING below (JSON in production), not Celery's own handlers
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- REST API ------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first, so an anonymous client gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON only: DRF's browsable API needs inline script, which our CSP refuses; the local
    # page at /api/docs/ documents the API from the OpenAPI schema instead.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # `?format=` is a documented filter of /api/traces/, not a renderer switch; only the
    # schema view reads it (console.api.common.SchemaFormatNegotiation).
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Replay Audit Console API",
    # /api/docs/ shows this; tests/console/test_api_tokens.py runs its curl example's header
    "DESCRIPTION": (
        "Authenticate with your console session (send the CSRF token as X-CSRFToken on "
        "writes) or with an API token: create one on the console's API tokens page (/tokens/), "
        "or with `manage.py api_token create USERNAME`; it is shown once. Send it as "
        "`Authorization: Token <token>`, for example:\n\n"
        'curl -H "Authorization: Token $TOKEN" '
        '"http://127.0.0.1:8000/api/traces/?format=replay-trace"\n\n'
        "A token acts with its owner's roles other than admin and council (those need a "
        "second factor); a revoked token gets 401 NOT_AUTHENTICATED."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}

# --- drift sampling (console.tasks.drift_sample, run by `celery -A config beat`) -----------
# the share of stored traces each sweep replays, at most MAX of them, every EVERY_SECONDS
REPLAY_DRIFT_SAMPLE_FRACTION = float(env_str("REPLAY_DRIFT_SAMPLE_FRACTION", "0.01"))
REPLAY_DRIFT_SAMPLE_MAX = env_int("REPLAY_DRIFT_SAMPLE_MAX", 100)
CELERY_BEAT_SCHEDULE = {
    "drift-sample": {
        "task": "console.tasks.drift_sample",
        "schedule": float(env_int("REPLAY_DRIFT_SAMPLE_EVERY_SECONDS", 6 * 3600)),
    },
}

# --- retention (governance.retention: `manage.py retention run`, and beat below) -----------
# REPLAY_RETENTION_JSON: {"default": days|null, "verdict": {...}, "format": {...}}; unset keeps
# everything forever. Checked here, so a policy that is not one stops the start-up.
try:
    REPLAY_RETENTION = json.loads(env_str("REPLAY_RETENTION_JSON", "null"))
    _retention_policy(REPLAY_RETENTION)
except ValueError as _exc:
    raise ImproperlyConfigured(f"REPLAY_RETENTION_JSON: {_exc}") from None
# dotted paths of functions traces -> {pk: why kept} (governance.retention.hold_register)
REPLAY_RETENTION_HOLDS = env_list("REPLAY_RETENTION_HOLDS", [])
CELERY_BEAT_SCHEDULE["retention-run"] = {
    "task": "governance.tasks.retention_run",
    "schedule": float(env_int("REPLAY_RETENTION_EVERY_SECONDS", 24 * 3600)),
}

# --- OpenTelemetry over OTLP/HTTP (otel/conf.py documents each) ---------------------------
REPLAY_OTLP_MAX_BODY_BYTES = env_int("REPLAY_OTLP_MAX_BODY_BYTES", 8 * 1024**2)
REPLAY_OTLP_MAX_DECODED_BYTES = env_int("REPLAY_OTLP_MAX_DECODED_BYTES", 16 * 1024**2)
REPLAY_OTEL_SEAL_AFTER_S = float(env_str("REPLAY_OTEL_SEAL_AFTER_S", "30"))
REPLAY_OTEL_SEAL_ORPHAN_AFTER_S = float(env_str("REPLAY_OTEL_SEAL_ORPHAN_AFTER_S", "3600"))
# reads the bodies no runner has read yet, then seals the traces that have gone quiet
CELERY_BEAT_SCHEDULE["otel-sweep"] = {
    "task": "otel.tasks.otel_sweep",
    "schedule": float(env_int("REPLAY_OTEL_SWEEP_EVERY_SECONDS", 5)),
}

# --- security ------------------------------------------------------------------------------
# /healthz answers anyone with its status only; its details (each check, the ledger head,
# timings) go to a signed-in admin or to a monitor sending `Authorization: Bearer <this>`
REPLAY_MONITORING_TOKEN = env_secret("REPLAY_MONITORING_TOKEN") or ""
# sign-in throttle (django-axes, configured in console.signin): this many failures per
# (username, address) lock the pair until the window has passed since its last failure
LOGIN_THROTTLE_FAILURES = env_int("LOGIN_THROTTLE_FAILURES", 5)
LOGIN_THROTTLE_WINDOW_SECONDS = env_int("LOGIN_THROTTLE_WINDOW_SECONDS", 900)
# a locked pair still signs in with password + a valid TOTP code this long after its last failure
LOGIN_THROTTLE_BACKOFF_SECONDS = env_int("LOGIN_THROTTLE_BACKOFF_SECONDS", 5)
# the client address behind reverse proxies: unset trusts nobody (REMOTE_ADDR); a hop count
# ("1") or comma-separated proxy addresses/CIDRs make the throttle read the header below
REPLAY_TRUSTED_PROXIES = env_str("REPLAY_TRUSTED_PROXIES")
parse_trusted_proxies(REPLAY_TRUSTED_PROXIES)  # nonsense fails at start-up, not at sign-in
REPLAY_TRUSTED_PROXY_HEADER = env_str("REPLAY_TRUSTED_PROXY_HEADER", "X-Forwarded-For")
# django-axes reads the settings above through console.signin's callables
AUTHENTICATION_BACKENDS = [
    "console.signin.SecondFactorAxesBackend",  # axes' guard, with the locked owner's way in
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = "console.signin.axes_failure_limit"
AXES_COOLOFF_TIME = "console.signin.axes_cool_off"
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_USERNAME_CALLABLE = "console.signin.axes_username"
AXES_CLIENT_IP_CALLABLE = "console.signin.axes_client_ip"
AXES_LOCKOUT_CALLABLE = "console.signin.lockout_response"
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True  # failures only: sign-ins are not logged a second time here
# what axes keeps of a failed try's form is masked, the code and the CSRF token with the rest
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "token", "csrfmiddlewaretoken"]
OTP_TOTP_ISSUER = "Replay Audit Console"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# REPLAY_INSECURE_LOCALHOST=1: with DEBUG off, plain http on this machine only (the local
# production stack, `make prod`): cookies without Secure, no redirect to https, no HSTS.
# Honoured only when DJANGO_ALLOWED_HOSTS names nothing but the loopback host.
REPLAY_INSECURE_LOCALHOST = not DEBUG and env_bool("REPLAY_INSECURE_LOCALHOST", False)
_LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
if REPLAY_INSECURE_LOCALHOST and not set(ALLOWED_HOSTS) <= _LOOPBACK:
    raise ImproperlyConfigured(
        "REPLAY_INSECURE_LOCALHOST=1 is only honoured when DJANGO_ALLOWED_HOSTS names nothing "
        f"but 127.0.0.1, localhost or [::1] (it names {', '.join(ALLOWED_HOSTS)})"
    )
if not DEBUG:
    SESSION_COOKIE_SECURE = not REPLAY_INSECURE_LOCALHOST
    CSRF_COOKIE_SECURE = not REPLAY_INSECURE_LOCALHOST
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True) and not (
        REPLAY_INSECURE_LOCALHOST
    )
    SECURE_HSTS_SECONDS = (
        0 if REPLAY_INSECURE_LOCALHOST else env_int("DJANGO_HSTS_SECONDS", 31536000)
    )
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # a load balancer's health probe may speak plain http to the web process
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Logs: one JSON object a line in production (REPLAY_LOG_FORMAT=json, the default with DEBUG
# off), readable text in development; every record carries the request id
# (console/requestlog.py), and each request ends with one `console.access` record.
REPLAY_LOG_FORMAT = env_str("REPLAY_LOG_FORMAT", "text" if DEBUG else "json")
if REPLAY_LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"REPLAY_LOG_FORMAT={REPLAY_LOG_FORMAT!r}: use json or text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "console.requestlog.RequestIdFilter"},
        "client_error": {"()": "console.requestlog.ClientErrorWithoutTraceback"},
        "query_mask": {"()": "console.requestlog.QueryMaskFilter"},
    },
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": REPLAY_LOG_FORMAT,
            "filters": ["request_id", "query_mask"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("DJANGO_LOG_LEVEL", "WARNING")},
    "loggers": {
        # through the root's handler only: Django's own "console" handler on this logger (in
        # DEBUG) printed every record, a 403's traceback included, a second time
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.request": {"filters": ["client_error"]},
        # the access log: on by default in production (REPLAY_ACCESS_LOG=0 turns it off)
        "console.access": {
            "level": "INFO" if env_bool("REPLAY_ACCESS_LOG", not DEBUG) else "WARNING"
        },
    },
}

# --- governance (issue 3; governance/conf.py documents each) ------------------------------
GOVERNANCE_COUNCIL_QUORUM = env_int("GOVERNANCE_COUNCIL_QUORUM", 2)
GOVERNANCE_DENY_THRESHOLD = env_int("GOVERNANCE_DENY_THRESHOLD", 1)
GOVERNANCE_FORCE_CONTINUE_HOURS = env_int("GOVERNANCE_FORCE_CONTINUE_HOURS", 24)
GOVERNANCE_FORCE_CONTINUE_MAX_HOURS = env_int("GOVERNANCE_FORCE_CONTINUE_MAX_HOURS", 168)
GOVERNANCE_VERIFY_INLINE_MAX = env_int("GOVERNANCE_VERIFY_INLINE_MAX", 1000)
GOVERNANCE_VERIFICATION_STALE_SECONDS = env_int("GOVERNANCE_VERIFICATION_STALE_SECONDS", 900)
# the origin line of the ledger's C2SP checkpoints and the key name they are signed under
GOVERNANCE_TLOG_ORIGIN = env_str("GOVERNANCE_TLOG_ORIGIN", "replay-audit-console.localhost/ledger")
# [{"url": "http://host:port", "vkey": "<witness vkey>"}, ...]: checkpoints are pushed to each
from tlog import note as _tlog_note  # noqa: E402 - pure, no Django

# development: `make run` (deploy/devrun.py) starts one local witness and names it here, read
# when DEBUG is on and GOVERNANCE_WITNESSES is not set
_LOCAL_WITNESSES = VAR_DIR / "witness" / "witnesses.json"
_WITNESSES_TEXT = env_str("GOVERNANCE_WITNESSES", "[]") or "[]"
if DEBUG and "GOVERNANCE_WITNESSES" not in os.environ and _LOCAL_WITNESSES.is_file():
    _WITNESSES_TEXT = _LOCAL_WITNESSES.read_text(encoding="utf-8")
try:
    GOVERNANCE_WITNESSES = json.loads(_WITNESSES_TEXT)
    if not isinstance(GOVERNANCE_WITNESSES, list) or not all(
        isinstance(w, dict) and isinstance(w.get("url"), str) and isinstance(w.get("vkey"), str)
        for w in GOVERNANCE_WITNESSES
    ):
        raise ValueError('a list of {"url": ..., "vkey": ...}')
    for _w in GOVERNANCE_WITNESSES:
        if not _w["url"].startswith(("http://", "https://")):
            raise ValueError(f"{_w['url']!r} is not an http(s) URL")
        _tlog_note.parse_verifier(_w["vkey"])  # a NoteError (a ValueError) names what is wrong
except ValueError as _exc:
    raise ImproperlyConfigured(f"GOVERNANCE_WITNESSES: {_exc}") from None
GOVERNANCE_WITNESS_QUORUM = env_int("GOVERNANCE_WITNESS_QUORUM", 1)
CELERY_BEAT_SCHEDULE["witness-push"] = {
    "task": "governance.tasks.witness_push",
    "schedule": float(env_int("GOVERNANCE_WITNESS_PUSH_EVERY_SECONDS", 300)),
}

# --- data subject requests (issue 14 D1; dsr/conf.py documents each) ----------------------
DSR_APPROVAL_BY = env_str("DSR_APPROVAL_BY", "admin")
DSR_DUE_MONTHS = env_int("DSR_DUE_MONTHS", 1)
