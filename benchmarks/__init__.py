"""Benchmarks beside the product, never imported by it. ``make bench`` runs one of them, the floor
benchmark (``python -m benchmarks``); each of the others has its own command, listed with its
current figures in docs/benchmarks.md."""
