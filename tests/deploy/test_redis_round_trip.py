"""The Redis round-trip benchmark (benchmarks/redis_round_trip.py) in a short mode, on the test
Redis: it names the reply parser redis-py uses here, and leaves none of its keys behind. No
timing is asserted; the figures are in docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from redis.utils import HIREDIS_AVAILABLE

from benchmarks import redis_round_trip


def test_a_short_round_trip_run_names_its_parser_and_cleans_up(
    monkeypatch: Any, queue: Any
) -> None:
    monkeypatch.setenv("REDIS_URL", settings.REDIS_URL)

    row = redis_round_trip.main(["--mixes", "20", "--rounds", "2"])

    assert HIREDIS_AVAILABLE  # a dependency of ours: redis[hiredis]
    assert row["parser"] == "hiredis"
    assert float(row["cpu_us"]) > 0 and float(row["wall_us"]) > 0  # type: ignore[arg-type]
    assert len(row["rounds_cpu_us"]) == 2  # type: ignore[arg-type]
    assert not queue.connection.exists(*redis_round_trip.KEYS)
