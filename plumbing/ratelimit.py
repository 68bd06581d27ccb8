"""One rate limiter for the web pages and the API, shared by every web process through Redis.

Counters live in Django's cache (Redis in every deployment), one counter per scope, identity and
fixed window, made with its expiry and counted atomically (``_count``), so parallel requests in
different processes can never both take the last slot.
A fixed window lets a client spend at most twice the rate across a window boundary, which is
enough to keep the GPUs from being flooded and needs no read-modify-write.

Rates come from ``settings.RATE_LIMITS`` (``"20/hour"``, ``"5/15m"``), read on every call so a test
or an operator can change them without a restart of the limiter.
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

from plumbing.redis_client import redis_client

log = logging.getLogger(__name__)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])[a-z]*\s*$")
_PERIOD_WORDS = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}


@dataclass(frozen=True)
class Rate:
    count: int
    seconds: int

    def __str__(self) -> str:
        word = _PERIOD_WORDS.get(self.seconds)
        period = word if word else f"{self.seconds // 60} minutes"
        return f"{self.count} per {period}"


def parse_rate(text: str) -> Rate:
    """``"20/hour"`` → 20 per 3600 s; ``"5/15m"`` → 5 per 900 s."""
    match = _RATE.match(text)
    if not match:
        raise ImproperlyConfigured(f"Rate {text!r} must look like '20/hour' or '5/15m'.")
    count, multiple, unit = match.groups()
    seconds = int(multiple or 1) * _UNITS[unit]
    return Rate(count=int(count), seconds=seconds)


def rate_for(scope: str) -> Rate:
    try:
        return parse_rate(settings.RATE_LIMITS[scope])
    except KeyError as exc:
        raise ImproperlyConfigured(f"RATE_LIMITS has no rate for scope {scope!r}.") from exc


@dataclass(frozen=True)
class Refusal:
    """A request over its limit: how long to wait, and what to tell the client."""

    scope: str
    rate: Rate
    wait_s: int

    @property
    def message(self) -> str:
        what = _SCOPE_WORDS.get(self.scope, "requests")
        return (
            f"Too many {what}: the limit is {self.rate}. "
            f"Try again in {self.wait_s} second{'s' if self.wait_s != 1 else ''}."
        )


_SCOPE_WORDS = {
    "uploads": "uploads",
    "api_user": "API requests",
    "api_anon": "API requests from your address",
    "login_account": "failed log-ins for this account",
    "login_ip": "failed log-ins from your address",
    "signup_ip": "sign-ups from your address",
    "password_reset_ip": "password reset requests from your address",
}


def _key(scope: str, ident: str, window: int) -> str:
    namespace = getattr(settings, "RATE_LIMIT_NAMESPACE", "")
    return f"rl:{namespace}:{scope}:{ident}:{window}"


def _window(rate: Rate, now: float) -> tuple[int, int]:
    """The current window's index and the whole seconds until it ends (at least 1)."""
    index = int(now // rate.seconds)
    return index, max(1, math.ceil((index + 1) * rate.seconds - now))


def rate_limit_hit(*, scope: str, ident: str) -> Refusal | None:
    """Count one request; a Refusal when it is over the scope's rate, else None."""
    rate = rate_for(scope)
    index, wait_s = _window(rate, time.time())
    key = _key(scope, ident, index)
    try:
        hits = _count(key, rate.seconds + 1)
    except ValueError:  # the key expired between add and incr: a fresh window has begun
        return None
    except Exception:  # the limiter must not take the site down with Redis; log loudly
        log.exception("rate limiter unavailable; letting %s/%s through", scope, ident)
        return None
    return Refusal(scope, rate, wait_s) if hits > rate.count else None


def _count(key: str, timeout_s: int) -> int:
    """Add one to the counter ``key`` (made with ``timeout_s`` to live, when new): its count.

    Every API read and page form passes here. With the cache on Redis, the counter is made and
    counted in one round trip (SET NX with its expiry, then INCR, in one MULTI/EXEC: no expiry
    falls between them, which would leave a counter without one) under the key the
    cache itself would use, so ``cache.decr`` (``rate_limit_undo``) and ``cache.clear`` see it;
    Django's ``add`` then ``incr`` is three (``incr`` asks whether the key exists first)."""
    client = _redis_of_cache()
    if client is None:
        cache.add(key, 0, timeout=timeout_s)
        return int(cache.incr(key))
    pipe = client.pipeline(transaction=True)
    full_key = cache.make_key(key)
    pipe.set(full_key, 0, ex=timeout_s, nx=True)
    pipe.incr(full_key)
    return int(pipe.execute()[1])


def _redis_of_cache() -> redis.Redis | None:
    """A client of the Redis behind the default cache (one per process and URL), or None when
    the cache is not Django's Redis backend on one server."""
    config = settings.CACHES["default"]
    location = config.get("LOCATION")
    if config["BACKEND"] != "django.core.cache.backends.redis.RedisCache":
        return None
    if not isinstance(location, str) or "," in location:
        return None  # several servers: the cache picks one per key; leave it to the cache
    return redis_client(location)


def client_ip(request: HttpRequest | Any) -> str:
    """The client's address: REMOTE_ADDR, or the address the trusted proxies saw.

    ``RATE_LIMIT_TRUSTED_PROXIES`` is how many proxies (load balancer, nginx) stand in front of
    Django; only their X-Forwarded-For entries are believed, so a client cannot pick its own IP.
    """
    proxies: int = getattr(settings, "RATE_LIMIT_TRUSTED_PROXIES", 0)
    remote = str(request.META.get("REMOTE_ADDR", ""))
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    if forwarded:
        _warn_untrusted_forwarding(remote)
    return remote or "unknown"


UNTRUSTED_FORWARDING = (
    "A request came through %s with X-Forwarded-For, but RATE_LIMIT_TRUSTED_PROXIES=0: "
    "every client behind a proxy shares its address, so one client's failed log-ins lock "
    "them all out. Set RATE_LIMIT_TRUSTED_PROXIES to the number of proxies in front of Django "
    "(logged once per process)."
)
_warned_untrusted_forwarding = False


def _warn_untrusted_forwarding(peer: str) -> None:
    """Once per process: a proxy forwards for clients whose addresses we do not believe."""
    global _warned_untrusted_forwarding
    if not _warned_untrusted_forwarding:
        _warned_untrusted_forwarding = True
        log.warning(UNTRUSTED_FORWARDING, peer or "an unknown peer")


def rate_limit_undo(*, scope: str, ident: str) -> None:
    """Give back one hit counted in the current window (a log-in that turned out right)."""
    rate = rate_for(scope)
    index, _ = _window(rate, time.time())
    try:
        cache.decr(_key(scope, ident, index))
    except ValueError:  # the window rolled over meanwhile: nothing to give back
        pass
    except Exception:
        log.exception("rate limiter unavailable while undoing %s/%s", scope, ident)


def refused_page(response: Any, refusal: Refusal) -> Any:
    """Turn a rendered page into the 429 a refused form submission answers, as the API does."""
    response.status_code = 429
    response["Retry-After"] = str(refusal.wait_s)
    return response
