#!/bin/sh
# Healthy while this container's rq worker is registered in Redis (rq drops the key when the
# worker stops sending heartbeats) and Redis answers.
set -eu
. /app/docker/worker-name.sh
exec python - "$EVAL_WORKER_NAME" <<'PY'
import os
import sys

import redis

name = sys.argv[1]
connection = redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=5)
if not connection.exists(f"rq:worker:{name}"):
    sys.exit(f"worker {name} is not registered in Redis")
PY
