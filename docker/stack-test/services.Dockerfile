# The stack test's stand-ins (stack_test.py) for the public images docker-compose.yml names and
# this machine cannot pull: PostgreSQL and Redis from Debian's packages, moto's S3 server for
# MinIO. Each runs as its own non-root user on BASE_IMAGE, a Debian bookworm base.
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS debian
ENV DEBIAN_FRONTEND=noninteractive
# Services are started by their containers, never by the packages' install scripts.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d


# Like the postgres image: POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB on first start,
# data in /var/lib/postgresql/data.
FROM debian AS postgres
RUN mkdir -p /etc/postgresql-common \
    && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf \
    && apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o postgres -g postgres -m 700 /var/lib/postgresql/data \
    && install -d -o postgres -g postgres /var/run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
USER postgres
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]


# Like the redis image: redis-server in /data (the compose file gives the command).
FROM debian AS redis
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o redis -g redis /data
WORKDIR /data
USER redis


# moto's S3 server, in memory: it keeps the bucket for as long as its container runs.
FROM debian AS s3
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/moto \
    && /opt/moto/bin/pip install --no-cache-dir "moto[server]>=5.0" \
    && useradd --system --uid 10002 s3
ENV PATH=/opt/moto/bin:$PATH
USER s3
