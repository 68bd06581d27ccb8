# Sourced by the worker entrypoint and its healthcheck so both compute the same name.
if [ -z "${EVAL_WORKER_NAME:-}" ]; then
    EVAL_WORKER_NAME="${WORKER_NAME_PREFIX:-worker}-$(hostname)"
fi
