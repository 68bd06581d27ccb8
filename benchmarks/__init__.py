"""Benchmarks for issue 3's figures; run them all with ``make bench`` (see docs/benchmarks.md)."""
