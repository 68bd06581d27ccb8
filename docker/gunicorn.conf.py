"""gunicorn settings for the web image; every value can be changed through the environment.

gthread workers: uploads of large models stream to a temporary file, and a thread per
request keeps one slow upload from holding a whole worker process.
"""

from __future__ import annotations

import os

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
worker_class = "gthread"
# A model upload of a few hundred MB over a slow link must not be cut off.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "300"))
graceful_timeout = 30
keepalive = 5
# Replacing a worker re-imports Django and drops its warm connections and caches, and the
# requests that reach it meanwhile wait: that is the tail participants feel at a deadline. A
# worker's memory grows only a little under load once warm (``make bench-http`` prints it
# before and after), so recycling is only insurance against a slow leak: rare, and jittered so
# that the workers are never replaced together. 0 turns it off.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "100000"))
max_requests_jitter = max_requests // 10
# Heartbeat files on tmpfs: a container's overlay filesystem can stall them.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
accesslog = "-"
errorlog = "-"
# Trust X-Forwarded-* only from the reverse proxy in front (FORWARDED_ALLOW_IPS, read by gunicorn
# itself; its default is 127.0.0.1).
