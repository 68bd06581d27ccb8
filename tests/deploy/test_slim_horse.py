"""The slim-horse benchmark (benchmarks/slim_horse.py) in its short mode: horses forked from a
Django worker and from a parent holding only the runner evaluate the same model to the same score,
and the slim parent is the smaller process. No time is asserted: the figures are the benchmark's
(docs/benchmarks.md)."""

from __future__ import annotations

from benchmarks import slim_horse


def test_horses_of_both_parents_score_the_same_and_the_slim_parent_holds_less() -> None:
    results = slim_horse.main(["--passes", "1", "--forks", "2"])

    django, slim = results["django"][0], results["slim"][0]
    assert django["scores"] == slim["scores"]
    assert len(django["scores"]) == 1  # every horse, of either parent, scored the model alike
    assert 0.9 < float(django["scores"][0]) <= 1.0  # the demo's logistic regression on digits
    # Django, its apps and the evaluation modules are most of a worker's memory.
    assert slim["anon_mb"] < django["anon_mb"] / 2
    for row in (django, slim):
        assert row["fork_ms"] > 0 and row["cpu_ms"] > 0 and row["faults"] > 0
