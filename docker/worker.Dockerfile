# GPU worker image: onnxruntime-gpu on NVIDIA's CUDA + cuDNN runtime base that matches it.
# onnxruntime-gpu 1.31.1 (pinned in docker/constraints.txt) needs CUDA 13.x and cuDNN 9, so the
# base is CUDA 13.0 with cuDNN 9 on Ubuntu 24.04 (Python 3.12). The host needs an NVIDIA driver
# that supports CUDA 13 (580 or newer) and the NVIDIA Container Toolkit.
# BASE_IMAGE may name the same base in another registry; without CUDA and cuDNN the build fails
# (check-cuda-libs.py). Hosts without a GPU run the CPU worker: docker/web.Dockerfile, worker-cpu.
# Build from the repository root: docker build -f docker/worker.Dockerfile -t onnx-portal-worker .
ARG BASE_IMAGE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    PORTAL_VAR_DIR=/var/lib/portal \
    EVAL_CACHE_DIR=/var/cache/portal \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv
WORKDIR /app
COPY pyproject.toml docker/constraints.txt docker/install-deps.py docker/check-cuda-libs.py /tmp/build/
# The build fails unless every CUDA and cuDNN library the pinned onnxruntime-gpu needs really
# loads (check-cuda-libs.py; get_available_providers() lists CUDA even when they do not). A CUDA
# session needs a GPU, so that part is proved at run time: the worker's self-test and gpu_check.
RUN python /tmp/build/install-deps.py /tmp/build/pyproject.toml /tmp/build/constraints.txt \
    && python /tmp/build/check-cuda-libs.py \
    && rm -rf /tmp/build

COPY . /app
RUN useradd --system --uid 10001 --home-dir /var/lib/portal --create-home portal \
    && mkdir -p /var/cache/portal && chown portal:portal /var/cache/portal

USER portal
# The cache of datasets fetched from S3; a volume lets the workers of one host share it.
VOLUME ["/var/cache/portal"]
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["/app/docker/worker-healthcheck.sh"]
ENTRYPOINT ["/app/docker/worker-entrypoint.sh"]
