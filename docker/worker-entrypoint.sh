#!/bin/sh
# GPU worker entrypoint. Worker names must be unique across every host sharing the Redis: unless
# EVAL_WORKER_NAME is given, the name is WORKER_NAME_PREFIX (e.g. "gpu-host-2-gpu0") plus the
# container's hostname, which differs between replicas started with `--scale`.
set -eu
cd /app
. /app/docker/worker-name.sh
export EVAL_WORKER_NAME
# On "evaluation" the worker listens to the queues of the device classes it serves
# (queueing/queues.py: derived from its device, or EVAL_DEVICE_CLASSES).
exec python manage.py rqworker evaluation \
    --worker-class workers.worker.EvaluationWorker \
    --name "$EVAL_WORKER_NAME" "$@"
