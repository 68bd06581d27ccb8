"""Notifier container healthcheck: an rq worker of this container listens to the notifications
queue (rq drops a worker's registration when it stops sending heartbeats) and Redis answers."""

from __future__ import annotations

import os
import socket
import sys

import redis

connection = redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=5)
host = socket.gethostname().encode()
workers = connection.smembers("rq:workers:notifications")
if not any(connection.hget(key, "hostname") == host for key in workers):
    sys.exit(f"no notifications worker of {host.decode()} is registered in Redis")
