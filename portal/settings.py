"""Settings for the ONNX evaluation portal, read from the environment (see README, Configuration).

Embedded defaults make the demo run on a bare machine: SQLite, an embedded Redis, local file
storage, CPU execution where there is no GPU. Production sets DATABASE_URL, REDIS_URL, S3 and
SECRET_KEY.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from portal.env import env_bool, env_choice, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR") or BASE_DIR / "var")

DEBUG = env_bool("DEBUG", False)
_secret = env_str("SECRET_KEY")
if not _secret:
    if not DEBUG:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("SECRET_KEY must be set (or SECRET_KEY_FILE) unless DEBUG=1.")
    _secret = "dev-only-insecure-key-do-not-use-in-production"
SECRET_KEY = _secret
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_rq",
    "portal",
    "submissions",
    "evaluation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'portal.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Work horses are separate processes: the test database must be a file they can open too,
    # and they wait for each other's writes instead of failing with "database is locked".
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "task-list"
LOGOUT_REDIRECT_URL = "task-list"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or BASE_DIR / "staticfiles")
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env_str("MEDIA_ROOT") or VAR_DIR / "media")

# Storage: local files by default; S3 (or MinIO through AWS_S3_ENDPOINT_URL) in production.
# Model files and datasets are never served publicly: workers read them through this storage.
STORAGE_BACKEND = env_choice("STORAGE_BACKEND", "local", ("local", "s3"))
if STORAGE_BACKEND == "s3":
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("AWS_STORAGE_BUCKET_NAME"),
            "endpoint_url": env_str("AWS_S3_ENDPOINT_URL"),
            "region_name": env_str("AWS_S3_REGION_NAME"),
            "access_key": env_str("AWS_ACCESS_KEY_ID"),
            "secret_key": env_str("AWS_SECRET_ACCESS_KEY"),
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
else:
    _default_storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
STORAGES = {
    "default": _default_storage,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Uploads always go to a temporary file on disk, never into memory, whatever their size.
FILE_UPLOAD_HANDLERS = ["django.core.files.uploadhandler.TemporaryFileUploadHandler"]
FILE_UPLOAD_MAX_MEMORY_SIZE = 0
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

# Redis: the queue, and nothing that cannot be rebuilt from the database.
REDIS_URL = env_str("REDIS_URL")
if not REDIS_URL:
    from portal.embedded_redis import embedded_redis_url

    REDIS_URL = embedded_redis_url(VAR_DIR / "redis")

EVALUATION_QUEUE = "evaluation"
RQ_QUEUES = {
    EVALUATION_QUEUE: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 3600},
}
RQ_SHOW_ADMIN_LINK = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
}

# Worker-side settings: how this process evaluates models (see evaluation/device.py).
EVAL_DEVICE = env_choice("EVAL_DEVICE", "auto", ("auto", "cuda", "cpu"))
EVAL_GPU_INDEX = env_int("EVAL_GPU_INDEX", 0, minimum=0)
EVAL_GPU_MEMORY_FRACTION = env_float("EVAL_GPU_MEMORY_FRACTION", 0.9, low=0.01, high=1.0)
EVAL_GPU_MEMORY_BYTES = env_int("EVAL_GPU_MEMORY_BYTES", 0, minimum=0)
EVAL_CUDNN_CONV_ALGO_SEARCH = env_choice(
    "EVAL_CUDNN_CONV_ALGO_SEARCH", "EXHAUSTIVE", ("exhaustive", "heuristic", "default")
).upper()
EVAL_INTRA_OP_THREADS = env_int("EVAL_INTRA_OP_THREADS", 0, minimum=0)
EVAL_WARMUP_RUNS = env_int("EVAL_WARMUP_RUNS", 2, minimum=0)
EVAL_WORKER_NAME = env_str("EVAL_WORKER_NAME") or ""
EVAL_CACHE_DIR = Path(env_str("EVAL_CACHE_DIR") or VAR_DIR / "worker-cache")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL") or "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- issue 3: evaluation engine (session options fixed per worker, CPU memory containment) ---
EVAL_INTER_OP_THREADS = env_int("EVAL_INTER_OP_THREADS", 1, minimum=1)
EVAL_GRAPH_OPTIMIZATION = env_choice(
    "EVAL_GRAPH_OPTIMIZATION", "all", ("disabled", "basic", "extended", "all")
)
# Address space (MB) one CPU evaluation may add to its work horse, enforced with RLIMIT_AS; 0 = off.
EVAL_CPU_MEMORY_LIMIT_MB = env_int("EVAL_CPU_MEMORY_LIMIT_MB", 4096, minimum=0)
