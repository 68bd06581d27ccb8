"""The fork-cost benchmark (benchmarks/fork_cost.py) in its short mode: a fork is measured, and
the same worker-like ORM work faults on pages it writes only after a fork. No time is asserted:
the figures are the benchmark's (docs/benchmarks.md)."""

from __future__ import annotations

import pytest

from benchmarks import fork_cost

pytestmark = pytest.mark.django_db


def test_work_after_a_fork_writes_through_page_faults_that_it_does_without_one() -> None:
    assert fork_cost.fork_ms(3) > 0

    measured = fork_cost.after_fork(3)

    faults = {mode: max(measured[mode]["faults"]) for mode in fork_cost.MODES}
    # Without a fork the work's pages are already the process's own and writable; after one,
    # its first write to each page faults, whether the child still shares it or has gone.
    assert min(measured["child alive"]["faults"]) > 10 * max(faults["no fork"], 1)
    assert min(measured["child exited"]["faults"]) > 10 * max(faults["no fork"], 1)
    assert all(len(measured[mode]["cpu_ms"]) == 2 for mode in fork_cost.MODES)
