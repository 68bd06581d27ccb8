# Web image (default target) and CPU worker image (target worker-cpu): the project on Debian's
# Python, run as the non-root user portal. BASE_IMAGE is any Debian bookworm image; the stack test
# (docker/stack-test/stack_test.py) passes one it builds locally.
# Build from the repository root:
#   docker build -f docker/web.Dockerfile -t onnx-portal-web .
#   docker build -f docker/web.Dockerfile --target worker-cpu -t onnx-portal-worker-cpu .
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS base

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    PORTAL_VAR_DIR=/var/lib/portal

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv
WORKDIR /app
# Dependencies first: this layer is rebuilt only when pyproject.toml or the pins change.
COPY pyproject.toml docker/constraints.txt docker/install-deps.py /tmp/build/
RUN python /tmp/build/install-deps.py /tmp/build/pyproject.toml /tmp/build/constraints.txt \
    && rm -rf /tmp/build

COPY . /app
RUN useradd --system --uid 10001 --home-dir /var/lib/portal --create-home portal \
    && mkdir -p /var/cache/portal && chown portal:portal /var/cache/portal


# The evaluation worker on CPU, for hosts without a GPU (docker-compose.yml: worker-cpu).
FROM base AS worker-cpu
ENV EVAL_CACHE_DIR=/var/cache/portal \
    EVAL_DEVICE=cpu
USER portal
# The cache of datasets fetched from S3; a volume lets the workers of one host share it.
VOLUME ["/var/cache/portal"]
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["/app/docker/worker-healthcheck.sh"]
ENTRYPOINT ["/app/docker/worker-entrypoint.sh"]


# gunicorn + whitenoise.
FROM base AS web
ENV STATIC_ROOT=/app/staticfiles \
    STATICFILES_MANIFEST=1 \
    PORT=8000
# Static files are collected at build time; the settings need a key and a Redis URL to import,
# neither is used by collectstatic.
RUN SECRET_KEY=collectstatic-only REDIS_URL=redis://unused:6379/0 \
        python manage.py collectstatic --noinput
USER portal
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 \
    CMD ["python", "/app/docker/web-healthcheck.py"]
ENTRYPOINT ["/app/docker/web-entrypoint.sh"]
CMD ["gunicorn", "--config", "/app/docker/gunicorn.conf.py", "portal.wsgi:application"]
