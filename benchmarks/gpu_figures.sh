#!/bin/sh
# Every GPU figure in one go, on a GPU host with the worker's Python environment (the GPU figures
# in docs/benchmarks.md were produced by this script). Embedded defaults: SQLite and the
# embedded Redis in a new temporary folder, so it needs no PostgreSQL and touches no other data.
# Logs go to $OUT (default var/gpu-figures), one file per step, and each step has its own time
# limit, so a step that hangs or fails leaves the others' figures.
#
#   sh benchmarks/gpu_figures.sh            # PYTHON=python3 by default
#
# On a host without network, set up first with benchmarks/gpu_bundle.sh and gpu_host_setup.sh
# (docs/development.md, "GPU figures on a host without network").
#
# Steps (STEPS, default all, in this order): the GPU acceptance check (`manage.py gpu_check --require-gpu`); the timing protocol on
# CUDA for the digits and the conv model (`benchmarks.timing_bench --cuda`); a model process's
# start and CUDA warm-up, which a worker does ahead (`benchmarks.model_process_start --cuda`); and
# the whole path end to end: `seed_demo` queues the demo baselines, one real EvaluationWorker on
# CUDA evaluates them in burst mode, and the rows are read back (provider, device, score, p50,
# seconds from start to finish, peak memory: on a GPU the model process's device memory, CUDA
# context included); and latency between fresh sessions per cuDNN algorithm search, with energy
# and device memory (`benchmarks.gpu_sessions`).
set -u
PY=${PYTHON:-python3}
OUT=${OUT:-var/gpu-figures}
mkdir -p "$OUT"
export DEBUG=1 PYTHONUNBUFFERED=1
export SECRET_KEY=${SECRET_KEY:-gpu-figures-only-key-not-for-production-use-0123456789}
# Never the host's own database, Redis or files: a fresh SQLite, embedded Redis and media folder
# of its own (seed_demo and the burst worker write there), whatever the environment names.
unset DATABASE_URL DATABASE_URL_FILE REDIS_URL REDIS_URL_FILE
export STORAGE_BACKEND=local
PORTAL_VAR_DIR=$(mktemp -d "${TMPDIR:-/tmp}/oep-gpu-figures.XXXXXX") || exit 1
export PORTAL_VAR_DIR
# A step stopped at its time limit leaves the embedded Redis server it started, which a SIGTERM
# does not end once its folder is gone (it cannot save there): SIGKILL, nothing in it is kept.
trap 'pkill -KILL -f "$PORTAL_VAR_DIR" 2>/dev/null; rm -rf "$PORTAL_VAR_DIR"' EXIT
export EVAL_DEVICE=${EVAL_DEVICE:-cuda}

STEPS=${STEPS:-gpu_check timing_digits timing_conv session end_to_end sessions}

step() {
    name=$1 limit=$2
    shift 2
    case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
    echo "== $name (limit ${limit} s): $*"
    started=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    echo "-- $name: exit $rc after $(($(date +%s) - started)) s"
    tail -n "${TAIL:-30}" "$OUT/$name.log"
}

nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv,noheader
$PY -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"
$PY manage.py migrate -v0 || exit 1

step gpu_check "${GPU_CHECK_S:-240}" $PY manage.py gpu_check --require-gpu
step timing_digits "${TIMING_S:-150}" $PY -m benchmarks.timing_bench --cuda --repeats 5 --rounds 3
step timing_conv "${TIMING_S:-150}" $PY -m benchmarks.timing_bench --cuda --workload depth-448 \
    --repeats 5 --rounds 3
step session "${SESSION_S:-120}" $PY -m benchmarks.model_process_start --cuda --rounds 2 --samples 5
# E2E_PIDNS=1: the worker in a PID namespace of its own, as compose and Kubernetes run it, where
# NVML does not list its model processes by their PIDs (peak memory then comes from the device's
# used memory, workers/measurement.py).
PIDNS=""
if [ -n "${E2E_PIDNS:-}" ]; then
    if unshare --pid --fork --mount-proc true 2>/dev/null; then
        PIDNS="unshare --pid --fork --mount-proc"
    else
        echo "E2E_PIDNS: unshare --pid does not work here; the worker runs in this namespace"
    fi
fi
step end_to_end "${E2E_S:-180}" sh -c "$PY manage.py seed_demo && $PIDNS $PY manage.py rqworker evaluation \
    --worker-class workers.worker.EvaluationWorker --burst --name gpu-figures && $PY manage.py \
    shell -c \"
from submissions.models import Submission
for s in Submission.objects.select_related('task').order_by('task__slug', 'id'):
    print(s.task.slug, s.original_name, s.status, s.provider, s.device_name, s.score,
          s.latency_p50_ms, s.latency_sessions, s.timing.get('session_p50s_ms'), s.timing.get('held_s'),
          s.energy_per_sample_j, s.average_power_w, (s.finished_at - s.started_at).total_seconds()
          if s.finished_at and s.started_at else None, s.peak_memory_bytes, s.error_message[:300])
\""
# shellcheck disable=SC2086 # SESSIONS_ARGS: more arguments, e.g. --modes EXHAUSTIVE+prefer_nhwc=1
step sessions "${SESSIONS_S:-300}" $PY -m benchmarks.gpu_sessions --sessions "${SESSIONS:-5}" \
    --json "$OUT/sessions.json" ${SESSIONS_ARGS:-}
