"""A process's client of a Redis named by its URL, outside Django's cache and rq's queues (which
hold their own): one client, so one connection pool, per URL and timeout. redis-py's pool notices
a fork and opens fresh connections in the child, so the client is safe to inherit."""

from __future__ import annotations

import functools

import redis


@functools.cache
def redis_client(url: str, timeout_s: float | None = None) -> redis.Redis:
    """The client of ``url``; ``timeout_s`` bounds connecting and each reply (None: no bound)."""
    return redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
