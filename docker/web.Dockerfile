# Web image: gunicorn + whitenoise on slim Python, as a non-root user.
# Build from the repository root: docker build -f docker/web.Dockerfile -t onnx-portal-web .
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    PORTAL_VAR_DIR=/var/lib/portal \
    STATIC_ROOT=/app/staticfiles \
    STATICFILES_MANIFEST=1 \
    PORT=8000

RUN python -m venv /opt/venv
WORKDIR /app
# Dependencies first: this layer is rebuilt only when pyproject.toml or the pins change.
COPY pyproject.toml docker/constraints.txt docker/install-deps.py /tmp/build/
RUN python /tmp/build/install-deps.py /tmp/build/pyproject.toml /tmp/build/requirements.txt \
    && pip install --constraint /tmp/build/constraints.txt -r /tmp/build/requirements.txt \
    && rm -rf /tmp/build

COPY . /app
# Static files are collected at build time; the settings need a key and a Redis URL to import,
# neither is used by collectstatic.
RUN SECRET_KEY=collectstatic-only REDIS_URL=redis://unused:6379/0 \
        python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --home-dir /var/lib/portal --create-home portal \
    && mkdir -p /var/cache/portal && chown portal:portal /var/cache/portal

USER portal
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 \
    CMD ["python", "/app/docker/web-healthcheck.py"]
ENTRYPOINT ["/app/docker/web-entrypoint.sh"]
CMD ["gunicorn", "--config", "/app/docker/gunicorn.conf.py", "portal.wsgi:application"]
