"""Settings for the ONNX evaluation portal, read from the environment (docs/configuration.md).

Embedded defaults make the demo run on a bare machine: SQLite, an embedded Redis, local file
storage, CPU execution where there is no GPU. Production sets DATABASE_URL, REDIS_URL, S3 and
SECRET_KEY. One topic per section; an unset or blank variable means its default.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from plumbing.ratelimit import parse_rate
from portal.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_int_list,
    env_list,
    env_required,
    env_str,
)

# --- Core: where files live, debug, the secret key, host names ---
BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR") or BASE_DIR / "var")

DEBUG = env_bool("DEBUG", False)
# The embedded Redis is for the demo (DEBUG) and the test runner only; production names its Redis.
_UNDER_TEST_RUNNER = "pytest" in sys.modules
SECRET_KEY = env_str("SECRET_KEY") or ""
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set (or SECRET_KEY_FILE) unless DEBUG=1.")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Static files and media ---
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or BASE_DIR / "staticfiles")
# Hashed, compressed, cached-forever static files need `collectstatic` first, so production
# (the web image) turns this on; tests and the demo keep Django's plain storage.
STATICFILES_MANIFEST = env_bool("STATICFILES_MANIFEST", False)
# Whitenoise serves the collected static files (gunicorn in production) once `collectstatic` has
# filled STATIC_ROOT; before that (tests, `make demo`) it would only warn.
_SERVE_COLLECTED_STATIC = STATICFILES_MANIFEST or STATIC_ROOT.is_dir()
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env_str("MEDIA_ROOT") or VAR_DIR / "media")

# --- Applications and middleware ---
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_rq",
    "portal",
    "submissions",
    "workers",
    "accounts",
    "drf_spectacular",
    "drf_spectacular_sidecar",
]

MIDDLEWARE = [
    # /healthz answers before host validation and sessions: the container healthcheck and load
    # balancers call it by IP.
    "portal.health.HealthCheckMiddleware",
    "django.middleware.security.SecurityMiddleware",  # redirects to HTTPS first
    *(["whitenoise.middleware.WhiteNoiseMiddleware"] if _SERVE_COLLECTED_STATIC else []),
    # An oversized body is refused from its Content-Length before anything reads it.
    "portal.upload_limits.UploadSizeLimitMiddleware",
    "portal.security_headers.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A view that cannot reach the database answers "down for a moment" (503), not a 500.
    "portal.database_outage.DatabaseOutageMiddleware",
]

# --- Templates ---
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

# --- Database ---
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'portal.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        # A kept connection that the server closed (a restart, a failover) is replaced at the
        # start of the next request instead of failing it.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Workers are separate processes: the test database must be a file they can open too,
    # and they wait for each other's writes instead of failing with "database is locked".
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    # IMMEDIATE: a transaction takes the write lock when it begins, so two processes never
    # deadlock upgrading read locks (SQLite answers that with "database is locked" at once).
    DATABASES["default"].setdefault("OPTIONS", {}).update(timeout=30, transaction_mode="IMMEDIATE")

# --- Accounts and passwords ---
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",  # existing hashes upgrade on next log-in
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "task-list"
LOGOUT_REDIRECT_URL = "task-list"

# --- Email (password resets) ---
EMAIL_BACKEND = env_str("EMAIL_BACKEND") or "django.core.mail.backends.console.EmailBackend"
EMAIL_HOST = env_str("EMAIL_HOST") or "localhost"
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL") or "portal@localhost"
# The portal's address as users reach it, for links in e-mails and webhook bodies.
SITE_URL = (env_str("SITE_URL") or "http://127.0.0.1:8000").rstrip("/")
# A failing webhook is tried again after each of these pauses (seconds), then given up.
WEBHOOK_RETRY_INTERVALS_S = env_int_list(
    "WEBHOOK_RETRY_INTERVALS_S", [10, 60, 300, 1800], minimum=0
)
WEBHOOK_TIMEOUT_S = env_float("WEBHOOK_TIMEOUT_S", 5.0, low=0.1, high=60.0)
# A notification still pending this long after its status change is enqueued again by recovery.
NOTIFICATIONS_SWEEP_AFTER_S = env_int("NOTIFICATIONS_SWEEP_AFTER_S", 60, minimum=1)

# --- Internationalisation ---
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Storage of model files and datasets ---
# Local files by default; S3 (or MinIO through AWS_S3_ENDPOINT_URL) in production. Model files and
# datasets are never public (private ACL, signed URLs only): workers on other hosts read them
# through this storage with their own credentials, never through a shared disk.
STORAGE_BACKEND = env_choice("STORAGE_BACKEND", "local", ("local", "s3"))
# A signed URL must stay valid longer than the longest evaluation job (task time limit + margin);
# S3 refuses signatures over 7 days.
AWS_QUERYSTRING_EXPIRE = env_int("AWS_QUERYSTRING_EXPIRE", 86400, minimum=3600)
if AWS_QUERYSTRING_EXPIRE > 7 * 86400:
    raise ImproperlyConfigured(
        f"AWS_QUERYSTRING_EXPIRE={AWS_QUERYSTRING_EXPIRE} exceeds S3's limit of 604800 (7 days)."
    )
if STORAGE_BACKEND == "s3":
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_required("AWS_STORAGE_BUCKET_NAME"),
            "endpoint_url": env_str("AWS_S3_ENDPOINT_URL"),
            "region_name": env_str("AWS_S3_REGION_NAME"),
            # Unset keys: boto3's own chain (instance role, ~/.aws) supplies credentials.
            "access_key": env_str("AWS_ACCESS_KEY_ID"),
            "secret_key": env_str("AWS_SECRET_ACCESS_KEY"),
            # MinIO and other self-hosted servers want path-style addressing.
            "addressing_style": env_choice(
                "AWS_S3_ADDRESSING_STYLE", "auto", ("auto", "path", "virtual")
            ),
            "signature_version": "s3v4",
            "default_acl": "private",
            "querystring_auth": True,
            "querystring_expire": AWS_QUERYSTRING_EXPIRE,
            "file_overwrite": False,
        },
    }
else:
    _default_storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
STORAGES = {
    "default": _default_storage,
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if STATICFILES_MANIFEST
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- Uploads ---
# Uploads always go to a temporary file on disk, never into memory, whatever their size.
FILE_UPLOAD_HANDLERS = ["django.core.files.uploadhandler.TemporaryFileUploadHandler"]
FILE_UPLOAD_MAX_MEMORY_SIZE = 0
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 2 * 1024**3, minimum=1)  # ONNX protobuf max: 2 GiB
# A model of UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES or more is inspected in a process of its own
# (parsing holds about twice the model's size, which a long-lived web process would keep much
# of); at most UPLOAD_INSPECTIONS_MAX such processes run at once among the web processes that
# share VAR_DIR (one host's). An upload waits up to UPLOAD_INSPECTIONS_WAIT_S for its turn,
# then is answered 503 + Retry-After. Smaller models are inspected in the web process.
UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES = env_int(
    "UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES", 8 * 1024**2, minimum=0
)
UPLOAD_INSPECTIONS_MAX = env_int("UPLOAD_INSPECTIONS_MAX", 2, minimum=1)
UPLOAD_INSPECTIONS_WAIT_S = env_int("UPLOAD_INSPECTIONS_WAIT_S", 30, minimum=0)
UPLOAD_INSPECTIONS_DIR = VAR_DIR / "upload-inspections"
# A client may wait for its submission to finish (GET /api/submissions/<id>/?wait=S): at most
# this many requests of one web process wait at a time (each holds a thread); the rest, and every
# one with 0, are answered at once, as without ``wait``.
SUBMISSION_WAITERS_PER_PROCESS = env_int("SUBMISSION_WAITERS_PER_PROCESS", 2, minimum=0)

# --- Redis: the queue and the shared cache, nothing that cannot be rebuilt from the database ---
REDIS_URL = env_str("REDIS_URL") or ""
if not REDIS_URL:
    if not (DEBUG or _UNDER_TEST_RUNNER):
        raise ImproperlyConfigured(
            "REDIS_URL must be set (or REDIS_URL_FILE) unless DEBUG=1: the embedded Redis is "
            "for the demo and the tests only."
        )
    from portal.embedded_redis import embedded_redis_url

    REDIS_URL = embedded_redis_url(VAR_DIR / "redis")

EVALUATION_QUEUE = "evaluation"
# Notifications (e-mail, webhooks) wait here for a plain `manage.py rqworker notifications
# --with-scheduler`; evaluation workers never listen to it, so a slow webhook never delays them.
NOTIFICATIONS_QUEUE = "notifications"
RQ_QUEUES = {
    EVALUATION_QUEUE: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 3600},
    NOTIFICATIONS_QUEUE: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 300},
}
RQ_SHOW_ADMIN_LINK = True
# One cache for every web process: the rate limiter's counters live here.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "portal",
    }
}

# --- Rate limits ---
RATE_LIMITS = {
    "uploads": env_str("RATE_LIMIT_UPLOADS") or "20/hour",  # per user, web form and API together
    "api_user": env_str("RATE_LIMIT_API_USER") or "300/min",  # API reads per signed-in user
    "api_anon": env_str("RATE_LIMIT_API_ANON") or "60/min",  # API reads per anonymous address
    "login_account": env_str("RATE_LIMIT_LOGIN_ACCOUNT") or "5/15m",  # failed log-ins
    "login_ip": env_str("RATE_LIMIT_LOGIN_IP") or "30/15m",
    "signup_ip": env_str("RATE_LIMIT_SIGNUP_IP") or "10/hour",
    "password_reset_ip": env_str("RATE_LIMIT_PASSWORD_RESET_IP") or "5/hour",
}
for _rate in RATE_LIMITS.values():
    parse_rate(_rate)  # a bad rate fails at start-up, naming itself
RATE_LIMIT_TRUSTED_PROXIES = env_int("RATE_LIMIT_TRUSTED_PROXIES", 0, minimum=0)
RATE_LIMIT_NAMESPACE = ""  # tests give each test its own counters
# Where cached boards' versions live (submissions.boards.cache): tests give each test its own
# and pass it to the worker processes they start, which bump the versions the pages read.
BOARD_CACHE_NAMESPACE = env_str("BOARD_CACHE_NAMESPACE") or ""

# --- REST API and its OpenAPI schema ---
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_THROTTLE_CLASSES": [
        "plumbing.throttles.ApiReadThrottle",
        "plumbing.throttles.UploadThrottle",
    ],
    "DEFAULT_PAGINATION_CLASS": "plumbing.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "plumbing.openapi.PortalAutoSchema",
    "EXCEPTION_HANDLER": "plumbing.refusal_responses.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ONNX evaluation portal API",
    "DESCRIPTION": "Upload ONNX models to tasks, follow their evaluation, read leaderboards.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # served from our own static files, no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two models have a "status" with choices of their own: each enum is named for its model.
    "ENUM_NAME_OVERRIDES": {
        "SubmissionStatusEnum": "submissions.models.core.SubmissionStatus.choices",
        "RegistrationStatusEnum": "submissions.models.challenges.RegistrationStatus.choices",
    },
}

# --- HTTPS, cookies and security headers ---
# Secure by default outside DEBUG: `manage.py check --deploy` passes with no warnings once
# SECRET_KEY and ALLOWED_HOSTS are set. Behind a TLS-terminating proxy set
# SECURE_PROXY_SSL_HEADER=1 (only then is X-Forwarded-Proto believed).
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("SECURE_PROXY_SSL_HEADER", False) else None
)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
CONTENT_SECURITY_POLICY = env_str("CONTENT_SECURITY_POLICY") or (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)

# --- Logging ---
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL") or "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- Evaluation workers: the device and the engine (workers/device.py, evaluation/runner.py) ---
EVAL_WORKER_NAME = env_str("EVAL_WORKER_NAME") or ""
EVAL_CACHE_DIR = Path(env_str("EVAL_CACHE_DIR") or VAR_DIR / "worker-cache")
EVAL_DEVICE = env_choice("EVAL_DEVICE", "auto", ("auto", "cuda", "cpu"))
EVAL_GPU_INDEX = env_int("EVAL_GPU_INDEX", 0, minimum=0)
# Which GPU NVML reads for this worker's stats; the UUID wins over EVAL_GPU_INDEX (NVML ignores
# CUDA_VISIBLE_DEVICES, so a UUID is the only name that means the same GPU to CUDA and NVML).
EVAL_GPU_UUID = env_str("EVAL_GPU_UUID") or ""
EVAL_GPU_MEMORY_FRACTION = env_float("EVAL_GPU_MEMORY_FRACTION", 0.9, low=0.01, high=1.0)
EVAL_GPU_MEMORY_BYTES = env_int("EVAL_GPU_MEMORY_BYTES", 0, minimum=0)
EVAL_CUDNN_CONV_ALGO_SEARCH = env_choice(
    "EVAL_CUDNN_CONV_ALGO_SEARCH", "EXHAUSTIVE", ("exhaustive", "heuristic", "default")
).upper()
# TF32 rounds float32 matrix products and convolutions to a 10-bit mantissa on Ampere and newer
# GPUs. onnxruntime's CUDA provider enables it by default; off here, so a float32 model is scored in
# float32 and its GPU outputs match the CPU's (the GPU acceptance check compares them).
EVAL_CUDA_TF32 = env_bool("EVAL_CUDA_TF32", False)
EVAL_INTRA_OP_THREADS = env_int("EVAL_INTRA_OP_THREADS", 0, minimum=0)
# onnxruntime's intra-op threads busy-wait after their work by default; off here, so an idle
# thread pool leaves the CPU to the worker's own work and to other workers (runner.DeviceConfig).
EVAL_INTRA_OP_SPINNING = env_bool("EVAL_INTRA_OP_SPINNING", False)
EVAL_INTER_OP_THREADS = env_int("EVAL_INTER_OP_THREADS", 1, minimum=1)
EVAL_GRAPH_OPTIMIZATION = env_choice(
    "EVAL_GRAPH_OPTIMIZATION", "all", ("disabled", "basic", "extended", "all")
)
EVAL_WARMUP_RUNS = env_int("EVAL_WARMUP_RUNS", 2, minimum=0)
# Address space (MB) one CPU evaluation may add to its model process (RLIMIT_AS); 0 = off.
EVAL_CPU_MEMORY_LIMIT_MB = env_int("EVAL_CPU_MEMORY_LIMIT_MB", 4096, minimum=0)

# GPU memory one worker process holds outside gpu_mem_limit (CUDA context, cuDNN and cuBLAS
# handles and workspaces); the per-GPU memory plan counts it once per worker.
EVAL_CUDA_CONTEXT_MB = env_int("EVAL_CUDA_CONTEXT_MB", 500, minimum=0)
# How long the CUDA self-test at worker start may take (the first session loads cuDNN).
EVAL_CUDA_SELFTEST_TIMEOUT_S = env_float(
    "EVAL_CUDA_SELFTEST_TIMEOUT_S", 120.0, low=5.0, high=1800.0
)
# Start the next job's model process while the worker is idle and let it warm up (onnxruntime,
# and on a GPU the CUDA context, cuDNN and cuBLAS); it still runs one model and ends
# (workers/sandboxing.py).
EVAL_START_AHEAD = env_bool("EVAL_START_AHEAD", True)
# Fork each model process from a per-worker model process server that imported numpy and
# onnxruntime once (evaluation/model_server.py); off, or should the server fail, each is started
# from a fresh interpreter.
EVAL_MODEL_SERVER = env_bool("EVAL_MODEL_SERVER", True)
# The model's process (docs/security.md): the protections a worker must have to start (any of
# no_new_privs, seccomp, landlock, netns, rlimits; empty: it starts with what the host offers
# and shows it), its CPU time, and read-only paths it needs beyond Python's and the system's
# libraries (a CUDA toolkit installed elsewhere).
EVAL_SANDBOX_REQUIRE = env_list("EVAL_SANDBOX_REQUIRE", [])
EVAL_SANDBOX_CPU_SECONDS = env_int("EVAL_SANDBOX_CPU_SECONDS", 3600, minimum=1)
EVAL_SANDBOX_READ_PATHS = env_list("EVAL_SANDBOX_READ_PATHS", [])
# Tests only: Python run inside the model's process where a model is loaded (the attack tests).
EVAL_SANDBOX_TEST_HOOK = env_str("EVAL_SANDBOX_TEST_HOOK", "") or ""
# The device classes this worker serves (e.g. "a40,gpu"); empty: derived from its device
# (a CPU worker serves "cpu", a CUDA worker "gpu" plus the classes matching its GPU's name).
EVAL_DEVICE_CLASSES = env_list("EVAL_DEVICE_CLASSES", [])
if any(not re.fullmatch(r"[-a-zA-Z0-9_]{1,32}", c) for c in EVAL_DEVICE_CLASSES):
    raise ImproperlyConfigured(
        f"EVAL_DEVICE_CLASSES={','.join(EVAL_DEVICE_CLASSES)!r}: give device class slugs "
        "separated by commas, e.g. a40,gpu."
    )

# --- Evaluation workers: the timing protocol (defaults; Task.timing overrides each) ---
# The timing phase runs at least MIN_TIME_S and MIN_BATCHES in all, at most MAX_TIME_S, split over
# PASSES passes, then more rounds of passes until the p50's 95 % confidence interval is within
# PRECISION of it (0: one round); a relative IQR of the pass medians above UNSTABLE_SPREAD marks it
# unstable.
EVAL_TIMING_MIN_TIME_S = env_float("EVAL_TIMING_MIN_TIME_S", 0.25, low=0.0, high=600.0)
EVAL_TIMING_PRECISION = env_float("EVAL_TIMING_PRECISION", 0.01, low=0.0, high=0.5)
EVAL_TIMING_MIN_BATCHES = env_int("EVAL_TIMING_MIN_BATCHES", 64, minimum=1)
EVAL_TIMING_MAX_TIME_S = env_float("EVAL_TIMING_MAX_TIME_S", 10.0, low=0.001, high=3600.0)
EVAL_TIMING_PASSES = env_int("EVAL_TIMING_PASSES", 5, minimum=1)
EVAL_TIMING_UNSTABLE_SPREAD = env_float("EVAL_TIMING_UNSTABLE_SPREAD", 0.05, low=0.0001, high=10.0)
# How long a worker waits for the device's timing lock before it times without exclusivity (the
# result says so), and the lock's TTL: a model process killed while timing frees it this fast.
EVAL_TIMING_LOCK_WAIT_S = env_float("EVAL_TIMING_LOCK_WAIT_S", 60.0, low=0.0, high=3600.0)
EVAL_TIMING_LOCK_TTL_S = env_float("EVAL_TIMING_LOCK_TTL_S", 5.0, low=0.3, high=600.0)

# --- Worker fleet: heartbeats, recovery, ops metrics (workers/fleet.py, recovery.py) ---
# Workers publish their state every EVAL_HEARTBEAT_INTERVAL_S; one silent for
# EVAL_HEARTBEAT_STALE_S is shown offline and its running submission is recovered.
EVAL_HEARTBEAT_INTERVAL_S = env_float("EVAL_HEARTBEAT_INTERVAL_S", 5.0, low=0.2, high=60.0)
EVAL_HEARTBEAT_STALE_S = env_float("EVAL_HEARTBEAT_STALE_S", 15.0, low=1.0, high=3600.0)
EVAL_HEARTBEAT_HISTORY_S = env_int("EVAL_HEARTBEAT_HISTORY_S", 3600, minimum=60)
# How often some worker runs workers/recovery.py (under a Redis lock, one at a time).
EVAL_RECOVERY_INTERVAL_S = env_float("EVAL_RECOVERY_INTERVAL_S", 10.0, low=0.5, high=3600.0)
EVAL_TEMPERATURE_WARN_C = env_int("EVAL_TEMPERATURE_WARN_C", 85, minimum=0)
EVAL_MEMORY_WARN_FRACTION = env_float("EVAL_MEMORY_WARN_FRACTION", 0.95, low=0.1, high=1.0)
# Bearer token for GET /metrics (Prometheus); the endpoint answers 404 while it is unset.
EVAL_METRICS_TOKEN = env_str("EVAL_METRICS_TOKEN") or ""
