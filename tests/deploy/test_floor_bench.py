"""The floor benchmark (benchmarks/floor_bench.py): the floor's sessions made as ours are, the
scores of both sides compared model by model, and its short mode: our workers and bare rq
workers on one PostgreSQL and Redis, every model scored by both (the bench stops on any failure)
and the same scores from both. The full run is a benchmark (docs/benchmarks.md); no timing is
asserted here."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from benchmarks import floor_bench, floor_job
from tests.workers.fleet_support import worker_env
from workers.device import device_config

SPINNING = "session.intra_op.allow_spinning"


def _settings_of(options: Any) -> tuple[Any, ...]:
    return (
        options.intra_op_num_threads,
        options.inter_op_num_threads,
        options.graph_optimization_level,
        options.execution_mode,
        options.get_session_config_entry(SPINNING),
    )


@pytest.mark.parametrize("intra, inter, spinning", [(0, 1, False), (2, 2, True)])
def test_the_floor_sessions_get_our_workers_session_options(
    settings: Any, intra: int, inter: int, spinning: bool
) -> None:
    settings.EVAL_INTRA_OP_THREADS, settings.EVAL_INTER_OP_THREADS = intra, inter
    settings.EVAL_INTRA_OP_SPINNING = spinning
    ours = device_config("worker")

    options = floor_bench.floor_options()

    assert _settings_of(floor_job.session_options(options)) == _settings_of(ours.session_options())
    assert options["warmup_runs"] == ours.warmup_runs


def test_agreeing_scores_are_counted() -> None:
    floor = {7: {"public": 0.968, "private": 0.95}, 8: {"public": 0.968, "private": 0.95}}

    assert floor_bench.compare_scores({7: (0.968, 0.95), 8: (0.968, 0.95)}, floor) == 2


def test_a_score_that_differs_stops_the_benchmark() -> None:
    floor = {7: {"public": 0.968, "private": 0.95}, 8: {"public": 0.968, "private": 0.95}}

    with pytest.raises(RuntimeError, match=r"submission 8 private: ours 0\.9, floor 0\.95"):
        floor_bench.compare_scores({7: (0.968, 0.95), 8: (0.968, 0.9)}, floor)


def test_a_model_ours_did_not_score_stops_the_benchmark() -> None:
    with pytest.raises(RuntimeError, match="submission 7 public: ours None"):
        floor_bench.compare_scores({}, {7: {"public": 0.968, "private": 0.95}})


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_short_floor_run_scores_every_model_on_both_sides(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("the floor benchmark measures on PostgreSQL (several workers write at once)")
    for key, value in worker_env().items():
        monkeypatch.setenv(key, value)  # the workers it starts use this test's database and Redis
    settings.RATE_LIMITS = settings.RATE_LIMITS  # restored after the test: the bench raises it

    result = floor_bench.main(
        ["--runs", "1", "--latency-count", "2", "--burst", "4", "--runner-seconds", "0"]
    )

    (latency,) = result["latency"]
    (burst,) = result["burst"]
    (queued,) = result["queued"]
    assert latency["ours"] > 0 and latency["floor"] > 0
    assert latency["upload_cpu"] > 0 and 0 < latency["upload"] < latency["ours"]
    assert burst["ours"] > 0 and burst["floor"] > 0
    assert queued["ours"] > 0 and queued["floor"] > 0
    # The burst's CPU by process group: both sides' workers (and their children) did the scoring,
    # the uploads ran in this process, and PostgreSQL worked for ours only.
    for side in ("ours", "floor"):
        cpu = burst["cpu"][side]
        assert cpu["workers"] > cpu["workers' own"] > 0 and cpu["this process"] > 0
        # Not host >= children: a child's CPU counts once it is reaped, a model process started
        # while idle, before the burst (and its host time) began, included.
        assert cpu["host"] > 0
        assert cpu["workers' own faults"] > 0
    # The floor's work horses are its workers' reaped children; ours are forked and reaped by
    # each worker's model process server, so they count in "workers" but not here.
    assert burst["cpu"]["floor"]["children's faults"] > 0
    if burst["cpu"]["ours"]["PostgreSQL"] is not None:  # its server runs on this host
        assert burst["cpu"]["ours"]["PostgreSQL"] > 0
    assert [row["workload"].split(",")[0] for row in result["runner"]] == [
        "digits logistic regression",
        "depth 3×3 conv",
    ]
    # From its release the queued burst's uploads are done: the workers score, this process
    # only waits (its polls are its CPU).
    for side in ("ours", "floor"):
        assert queued["cpu"][side]["workers"] > queued["cpu"][side]["workers' own"] >= 0
    # Ours do the database work in the worker itself; the floor's workers mostly fork and wait,
    # for 4 models less than one tick of /proc's CPU counters, so theirs may read 0.
    assert queued["cpu"]["ours"]["workers' own"] > 0
    # warm-up, latency, burst, queued burst: every model scored by both, the same on both
    assert result["floor_jobs"] == result["scores_compared"] == 1 + 2 + 4 + 4
