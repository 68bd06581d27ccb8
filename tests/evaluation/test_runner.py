"""The pure runner against numpy references, with real onnxruntime sessions."""

from __future__ import annotations

import resource
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import evaluation.runner as runner_module
from evaluation.gpu import gpu_info
from evaluation.limits import TimeLimit, added_memory_limit, address_space_bytes
from evaluation.metrics import compute_family
from evaluation.runner import (
    CPU,
    CUDA,
    CUDA_NOT_ACTIVE,
    Dataset,
    DeviceConfig,
    DeviceUnavailable,
    EvaluationError,
    _check_finite,
    _screened_finite,
    create_session,
    evaluate,
    out_of_memory_error,
    predict,
)
from tests.builders import (
    DIGITS_SPEC,
    digits_like,
    finish,
    linear_classifier,
    linear_reference,
    unary_model,
)
from tests.evaluation.hostile.models import expand_bomb
from tests.workers import fake_nvml
from tests.workers.fake_nvml import GIB, FakeGpu, FakeNvml
from workers.device import device_config

SPEC = DIGITS_SPEC
CPU_ONLY = DeviceConfig(worker_name="test-worker", warmup_runs=1)


def weights(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(64, 10)).astype(np.float32), rng.normal(size=10).astype(np.float32)


def test_scores_match_a_numpy_reference_on_public_and_private_rows() -> None:
    arrays = digits_like(n=100)  # 100 rows at batch 16: the last batch is padded
    w, b = weights()
    result = evaluate(linear_classifier(w, b), Dataset.from_arrays(arrays), SPEC, CPU_ONLY)
    logits = linear_reference(w, b, arrays["inputs"])
    public = arrays["split"] == "public"
    expected_public = float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))
    expected_private = float(np.mean(logits[~public].argmax(1) == arrays["targets"][~public]))
    assert result.score == pytest.approx(expected_public, abs=1e-12)
    assert result.score_private == pytest.approx(expected_private, abs=1e-12)
    assert result.metrics == pytest.approx(
        compute_family("accuracy", logits[public], arrays["targets"][public])
    )
    assert result.samples_evaluated == 100
    assert result.provider == CPU
    # Timed in a phase of its own, over at least the protocol's minimum number of batches.
    assert result.timing["batches"] >= SPEC.timing.min_batches
    assert 0 < len(result.batch_latencies_ms) <= result.timing["batches"]
    assert result.latency_p50_ms > 0 and result.throughput > 0


def test_padding_rows_never_reach_a_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every real row is class 3 and the model always predicts 3 except for rows of all zeros.
    # Padding repeats the last real row, so it could only change the count, never the accuracy,
    # and the metric must see exactly the 17 real rows.
    arrays = digits_like(n=17)
    arrays["targets"][:] = 3
    w = np.zeros((64, 10), np.float32)
    b = np.zeros(10, np.float32)
    b[3] = 1.0
    seen: list[int] = []
    monkeypatch.setattr(runner_module, "CHECK_EVERY_S", 0.0)  # a checkpoint between batches
    result = evaluate(
        linear_classifier(w, b),
        Dataset.from_arrays(arrays),
        SPEC,
        CPU_ONLY,
        progress=lambda f: seen.append(round(f * 2)),
    )
    assert result.samples_evaluated == 17
    assert result.score == 1.0 and result.score_private == 1.0
    assert seen == [1]  # between the two batches; the worker sets 1.0 when it saves the result


def test_every_run_uses_exactly_the_task_batch_shape() -> None:
    # Shape-echoing model: output[b, :] holds the batch size the model saw in every column.
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    nodes = [
        helper.make_node("Shape", ["input"], ["shape"], start=0, end=1),
        helper.make_node("Cast", ["shape"], ["n"], to=TensorProto.FLOAT),
        helper.make_node("Flatten", ["input"], ["flat"]),
        helper.make_node("MatMul", ["flat", "zeros"], ["z"]),
        helper.make_node("Add", ["z", "n"], ["output"]),
    ]
    zeros = numpy_helper.from_array(np.zeros((64, 10), np.float32), "zeros")
    model = finish(helper.make_graph(nodes, "echo", [x], [y], [zeros]))
    arrays = {"inputs": digits_like(n=20)["inputs"], "targets": np.zeros((20, 10), np.float32)}
    spec = replace(SPEC, metric="mae")
    result = evaluate(model, Dataset.from_arrays(arrays), spec, CPU_ONLY)
    assert result.metrics["mae"] == pytest.approx(16.0)  # every row saw a batch of 16


def test_output_of_the_wrong_shape_fails_naming_both_shapes() -> None:
    model = unary_model("Flatten", ["batch", 1, 8, 8], ["batch", 64])
    with pytest.raises(EvaluationError) as caught:
        evaluate(model, Dataset.from_arrays(digits_like(n=20)), SPEC, CPU_ONLY)
    assert str(caught.value) == (
        "The model's output has shape [16, 64] but this task expects [16, 10] "
        "(batch 16 × per-sample [10])."
    )


def test_nan_output_fails_with_a_plain_message() -> None:
    w, b = weights()
    b[0] = np.nan
    with pytest.raises(EvaluationError, match=r"output contains NaN or infinity \(batch 1\)"):
        evaluate(linear_classifier(w, b), Dataset.from_arrays(digits_like(n=20)), SPEC, CPU_ONLY)


def test_model_that_onnxruntime_cannot_load_fails_with_its_reason() -> None:
    # Passes inspection (one input, right shape) but Gemm needs 2-D inputs: session creation fails.
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    w = numpy_helper.from_array(np.zeros((3, 3, 3), np.float32), "W")
    model = finish(
        helper.make_graph(
            [helper.make_node("Gemm", ["input", "W"], ["output"])], "g", [x], [y], [w]
        )
    )
    with pytest.raises(EvaluationError, match=r"^onnxruntime could not load the model: "):
        evaluate(model, Dataset.from_arrays(digits_like(n=20)), SPEC, CPU_ONLY)


def test_task_requiring_a_gpu_fails_instead_of_scoring_on_cpu() -> None:
    spec = replace(SPEC, requires_gpu=True)
    w, b = weights()
    with pytest.raises(DeviceUnavailable) as caught:
        evaluate(linear_classifier(w, b), Dataset.from_arrays(digits_like(n=20)), spec, CPU_ONLY)
    assert str(caught.value) == CUDA_NOT_ACTIVE
    assert "test-worker" not in str(caught.value)  # participants never see worker names


def test_cuda_options_follow_the_worker_configuration() -> None:
    device = DeviceConfig(
        use_cuda=True, device_id=2, gpu_mem_limit=6 << 30, cudnn_conv_algo_search="heuristic"
    )
    (name, options), cpu = device.providers()
    assert (name, cpu) == (CUDA, CPU)
    assert options == {
        "device_id": 2,
        "arena_extend_strategy": "kSameAsRequested",
        "cudnn_conv_algo_search": "HEURISTIC",
        "do_copy_in_default_stream": "1",
        "use_tf32": "0",
        "gpu_mem_limit": 6 << 30,
    }
    # TF32 only where the operator asks for it (EVAL_CUDA_TF32).
    (_, options), _ = replace(device, use_tf32=True).providers()
    assert options["use_tf32"] == "1"


def test_result_records_the_provider_that_actually_ran() -> None:
    # Asking for CUDA on a machine without a usable GPU falls back to CPU; the result says so.
    device = DeviceConfig(use_cuda=True, gpu_mem_limit=1 << 30, warmup_runs=0)
    w, b = weights()
    result = evaluate(linear_classifier(w, b), Dataset.from_arrays(digits_like(n=20)), SPEC, device)
    has_gpu = gpu_info() is not None  # NVML, independent of onnxruntime
    assert result.provider == (CUDA if has_gpu else CPU)
    assert result.device_name == (device.device_name if has_gpu else "CPU")


def endless_loop_model() -> bytes:
    """input -> Loop(max int64, cond always true) adding 1 to a counter -> never returns."""
    body_in = [
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, ["batch", 10]),
    ]
    body_out = [
        helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, ["batch", 10]),
    ]
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
        ],
        "body",
        body_in,
        body_out,
        [one],
    )
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    init = [
        numpy_helper.from_array(np.array(np.iinfo(np.int64).max, np.int64), "max"),
        numpy_helper.from_array(np.array(True), "true"),
        numpy_helper.from_array(np.zeros((64, 10), np.float32), "W"),
    ]
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"]),
        helper.make_node("MatMul", ["flat", "W"], ["start"]),
        helper.make_node("Loop", ["max", "true", "start"], ["output"], body=body),
    ]
    return finish(helper.make_graph(nodes, "endless", [x], [y], init))


def test_endless_loop_is_stopped_at_the_time_limit() -> None:
    spec = replace(SPEC, time_limit_s=1)
    started = time.monotonic()
    with pytest.raises(EvaluationError) as caught:
        evaluate(endless_loop_model(), Dataset.from_arrays(digits_like(n=20)), spec, CPU_ONLY)
    assert str(caught.value) == "time limit of 1 s exceeded"
    assert time.monotonic() - started < 10


def test_session_options_are_the_workers_not_the_models() -> None:
    device = DeviceConfig(intra_op_threads=1, inter_op_threads=1, graph_optimization="basic")
    options = device.session_options()
    assert options.intra_op_num_threads == 1
    assert options.inter_op_num_threads == 1
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    # And they are what the session really runs with.
    w, b = weights()
    session = create_session(linear_classifier(w, b), device)
    assert session.get_session_options().intra_op_num_threads == 1
    assert session.get_session_options().graph_optimization_level == (
        ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    )


def sqrt_model() -> bytes:
    """Digits-shaped: NaN in the rows of any input with a negative pixel."""
    return finish(
        helper.make_graph(
            [
                helper.make_node("Sqrt", ["input"], ["root"]),
                helper.make_node("Flatten", ["root"], ["flat"]),
                helper.make_node("MatMul", ["flat", "W"], ["output"]),
            ],
            "sqrt",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])],
            [numpy_helper.from_array(np.ones((64, 10), np.float32), "W")],
        )
    )


def test_nan_in_a_later_batch_names_that_batch() -> None:
    # sqrt of a negative pixel is NaN: only row 40 has one, and row 40 is in batch 3 of 16.
    arrays = digits_like(n=50)
    arrays["inputs"][40, 0, 0, 0] = -1.0
    with pytest.raises(EvaluationError) as caught:
        evaluate(sqrt_model(), Dataset.from_arrays(arrays), SPEC, CPU_ONLY)
    assert str(caught.value) == "The model's output contains NaN or infinity (batch 3)."


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("columns", [10, 1 << 14], ids=["small", "large"])
def test_huge_finite_outputs_are_not_taken_for_infinity(dtype: Any, columns: int) -> None:
    # Their sum and their dot product overflow to infinity; the exact check behind the screen
    # still accepts them.
    preds = np.full((64, columns), np.finfo(dtype).max / 2, dtype)
    assert not _screened_finite(preds)
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.add.reduce(preds, axis=None))
        assert not np.isfinite(np.dot(preds.reshape(-1), preds.reshape(-1)))
    _check_finite(preds, batch_size=16)
    preds[50, 3] = np.inf
    with pytest.raises(EvaluationError, match=r"NaN or infinity \(batch 4\)"):
        _check_finite(preds, batch_size=16)


@pytest.mark.parametrize(
    ("columns", "dtype", "order"),
    [
        (2, np.float32, "C"),  # the dot product, on ten values
        (2, np.float16, "C"),  # no BLAS for half floats: the sum
        (1 << 18, np.float32, "C"),  # the dot product
        (1 << 18, np.float64, "C"),  # the dot product
        (1 << 18, np.float32, "F"),  # not contiguous row by row: the sum
        (1 << 18, np.float16, "C"),  # no BLAS for half floats: the sum
    ],
    ids=[
        "dot-small",
        "sum-small",
        "dot-float32",
        "dot-float64",
        "sum-fortran-order",
        "sum-float16",
    ],
)
def test_nan_and_opposite_infinities_are_caught_by_every_screen(
    columns: int, dtype: Any, order: str
) -> None:
    preds = np.zeros((8, columns), dtype, order=order)
    preds[5, 1] = np.nan
    with pytest.raises(EvaluationError, match=r"\(batch 2\)"):
        _check_finite(preds, batch_size=4)
    assert not _screened_finite(preds)
    preds[5, 1] = 0.0
    preds[1, :2] = [np.inf, -np.inf]  # their sum is NaN: caught all the same
    with pytest.raises(EvaluationError, match=r"\(batch 1\)"):
        _check_finite(preds, batch_size=4)
    preds[1, :2] = [0.0, -np.inf]
    with pytest.raises(EvaluationError, match=r"\(batch 1\)"):
        _check_finite(preds, batch_size=4)
    assert not _screened_finite(preds)
    preds[1, :2] = 0.0
    _check_finite(preds, batch_size=4)
    assert _screened_finite(preds)  # finite values pass the screen itself


def test_memory_bomb_fails_with_a_plain_message_under_the_memory_limit() -> None:
    device = DeviceConfig(worker_name="test-worker", cpu_memory_limit_bytes=256 << 20)
    with (
        added_memory_limit(device.cpu_memory_limit_bytes),
        pytest.raises(EvaluationError) as caught,
    ):
        evaluate(expand_bomb(), Dataset.from_arrays(digits_like(n=20)), SPEC, device)
    assert str(caught.value) == (
        "The model ran out of memory: it needs more than the per-evaluation limit of 256 MiB on "
        "this worker. It asked for 1,562 MiB at once (operator Expand)."
    )


def test_memory_limit_stops_a_large_allocation_and_is_lifted_afterwards() -> None:
    before = resource.getrlimit(resource.RLIMIT_AS)
    with added_memory_limit(64 << 20) as limit:
        assert limit is not None and resource.getrlimit(resource.RLIMIT_AS)[0] == limit
        assert limit - address_space_bytes() <= 64 << 20
        with pytest.raises(MemoryError):
            np.ones(256 << 20, dtype=np.uint8)
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert np.ones(256 << 20, dtype=np.uint8).sum() == 256 << 20  # fine once lifted


def test_no_memory_limit_when_none_is_configured() -> None:
    before = resource.getrlimit(resource.RLIMIT_AS)
    with added_memory_limit(None) as limit:
        assert limit is None and resource.getrlimit(resource.RLIMIT_AS) == before


def test_out_of_memory_is_recognised_from_python_and_onnxruntime_errors() -> None:
    cpu = DeviceConfig(cpu_memory_limit_bytes=1 << 30)
    gpu = DeviceConfig(use_cuda=True, gpu_mem_limit=2 << 30)
    assert str(out_of_memory_error(MemoryError(), cpu)) == (
        "The model ran out of memory: it needs more than the per-evaluation limit of 1,024 MiB on "
        "this worker."
    )
    cuda_text = (
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running "
        "Conv node. Name:'c' Status Message: ... Failed to allocate memory for requested buffer "
        "of size 4294967296"
    )
    assert str(out_of_memory_error(RuntimeError(cuda_text), gpu)) == (
        "The model ran out of memory: it needs more than the per-evaluation limit of 2,048 MiB on "
        "this worker. It asked for 4,096 MiB at once (operator Conv)."
    )
    # What the CUDA arena says at its gpu_mem_limit, as onnxruntime-gpu 1.31 said it on an H200
    # (64 MiB share, a 256 MiB Expand): the GPU acceptance check's gpu_mem_limit case.
    arena_text = (
        "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Expand node. "
        "Name:'' Status Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:360 "
        "void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*) "
        "Available memory of 67108608 is smaller than requested bytes of 268435456"
    )
    small = DeviceConfig(use_cuda=True, gpu_mem_limit=64 << 20)
    assert str(out_of_memory_error(RuntimeError(arena_text), small)) == (
        "The model ran out of memory: it needs more than the per-evaluation limit of 64 MiB on "
        "this worker. It asked for 256 MiB at once (operator Expand)."
    )
    assert out_of_memory_error(RuntimeError("invalid expand shape"), cpu) is None


def test_cpu_worker_gets_the_configured_memory_limit_and_a_cuda_worker_none(settings: Any) -> None:
    settings.EVAL_CPU_MEMORY_LIMIT_MB = 300
    settings.EVAL_DEVICE = "cpu"
    assert device_config("w").cpu_memory_limit_bytes == 300 * 1_048_576
    settings.EVAL_CPU_MEMORY_LIMIT_MB = 0
    assert device_config("w").cpu_memory_limit_bytes is None


def test_gpu_worker_takes_its_memory_share_and_no_address_space_limit(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = FakeGpu(name="NVIDIA H100 80GB HBM3", memory_total=80 * GIB)
    fake_nvml.install(monkeypatch, FakeNvml(gpu))  # the NVML boundary: this machine has no GPU
    settings.EVAL_DEVICE = "auto"
    settings.EVAL_GPU_MEMORY_FRACTION = 0.5
    settings.EVAL_GPU_MEMORY_BYTES = 0
    settings.EVAL_CPU_MEMORY_LIMIT_MB = 4096
    device = device_config("gpu0-a")
    assert CUDA in ort.get_available_providers()  # onnxruntime-gpu is what is installed
    assert device.use_cuda and device.gpu_mem_limit == 40 * GIB
    assert device.cpu_memory_limit_bytes is None  # CUDA maps far more than an RLIMIT_AS allows
    assert device.device_name == "NVIDIA H100 80GB HBM3"
    settings.EVAL_GPU_MEMORY_BYTES = 6 << 30
    assert device_config("gpu0-a").gpu_mem_limit == 6 << 30
    assert not device_config("gpu0-a").use_tf32  # float32 stays float32 unless asked
    idle = device_config("gpu0-a").session_options()
    assert idle.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    settings.EVAL_INTRA_OP_SPINNING = True
    spinning = device_config("gpu0-a").session_options()
    assert spinning.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    settings.EVAL_CUDA_TF32 = True
    assert device_config("gpu0-a").providers()[0][1]["use_tf32"] == "1"
    settings.EVAL_DEVICE = "cpu"
    cpu = device_config("gpu0-a")
    assert not cpu.use_cuda and cpu.cpu_memory_limit_bytes == 4096 * 1_048_576


def test_faked_gpu_without_a_driver_still_records_cpu_and_refuses_requires_gpu(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NVML says "GPU" but CUDA cannot start here: the session falls back and the result says so.
    gpu = FakeGpu(name="NVIDIA H100 80GB HBM3", memory_total=80 * GIB)
    fake_nvml.install(monkeypatch, FakeNvml(gpu))  # the NVML boundary: this machine has no GPU
    settings.EVAL_DEVICE = "auto"
    device = device_config("gpu0-a")
    w, b = weights()
    data = Dataset.from_arrays(digits_like(n=20))
    if create_session(linear_classifier(w, b), device).get_providers()[0] == CUDA:
        pytest.skip("a real GPU is present")
    assert evaluate(linear_classifier(w, b), data, SPEC, device).provider == CPU
    spec = replace(SPEC, requires_gpu=True)
    with pytest.raises(DeviceUnavailable) as caught:
        evaluate(linear_classifier(w, b), data, spec, device)
    assert "gpu0-a" not in str(caught.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("where", [0, 1, -1], ids=["first-part", "second-part", "last-part"])
def test_large_predictions_screened_in_parts_catch_a_nan_in_any_part(
    dtype: Any, where: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 32 MiB: four parts of 8 MiB wherever this runs (the CPU count is fixed here, so that the
    # split does not depend on the machine).
    monkeypatch.setattr(runner_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    preds = np.ones((64, (32 << 20) // 64 // np.dtype(dtype).itemsize), dtype)
    assert runner_module._screen_parts(preds) == 4
    assert _screened_finite(preds)
    part = preds.size // 4
    flat = preds.reshape(-1)
    index = {0: 3, 1: part + 7, -1: flat.size - 1}[where]
    flat[index] = np.nan
    assert not _screened_finite(preds)
    with pytest.raises(EvaluationError, match=rf"\(batch {index // preds.shape[1] // 16 + 1}\)"):
        _check_finite(preds, batch_size=16)


def test_screen_parts_follow_size_and_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module.os, "sched_getaffinity", lambda pid: {0, 1})
    assert runner_module._screen_parts(np.zeros(10, np.float32)) == 1
    assert runner_module._screen_parts(np.zeros(2 << 20, np.float32)) == 2  # 8 MiB, 2 CPUs
    monkeypatch.setattr(runner_module.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert runner_module._screen_parts(np.zeros(3 << 20, np.float32)) == 3  # 12 MiB
    assert runner_module._screen_parts(np.zeros(64 << 20, np.float32)) == 4  # never more
    monkeypatch.setattr(runner_module.os, "sched_getaffinity", lambda pid: {0})
    assert runner_module._screen_parts(np.zeros(64 << 20, np.float32)) == 1


def test_screen_without_threads_reads_every_part_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under a tight address-space limit a thread's stack may not be had: the screen still reads
    # every part, on this thread.
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(runner_module.threading.Thread, "start", refuse)
    preds = np.ones((4, 1 << 20), np.float32)
    assert runner_module._parallel_dot_finite(preds, 4)
    preds[3, -1] = np.inf
    assert not runner_module._parallel_dot_finite(preds, 4)


def screen_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "finite-screen"]


@pytest.fixture
def screened_during_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every output screened as it comes, as on CUDA, here on the CPU; the list names the
    threads that screened."""
    screeners: list[str] = []
    screen = runner_module._screened_finite

    def recorded(preds: np.ndarray) -> bool:
        screeners.append(threading.current_thread().name)
        return screen(preds)

    def one_at_a_time(
        executor: runner_module._Executor, batches: Any, spec: Any, progress: Any, turn: Any
    ) -> Any:
        def run_one(batch: np.ndarray) -> np.ndarray:
            feed = {executor.input_name: batch}
            return executor.run_cpu(executor.output_names, feed, executor.run_options)[0]

        return executor.run_each(batches, spec, progress, turn, run_one)

    # The loop CUDA runs, one batch at a time, with a checkpoint between every two.
    monkeypatch.setattr(runner_module._Executor, "run_all", one_at_a_time)
    monkeypatch.setattr(runner_module, "CHECK_EVERY_S", 0.0)
    monkeypatch.setattr(runner_module, "_screens_during_runs", lambda on_cuda, out: True)
    monkeypatch.setattr(runner_module, "_screened_finite", recorded)
    return screeners


def test_outputs_screened_during_the_runs_skip_the_check_after_the_loop(
    screened_during_runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    arrays = digits_like(n=50)
    session = create_session(sqrt_model(), CPU_ONLY)
    expected = predict(session, arrays["inputs"], SPEC, CPU_ONLY)
    assert screened_during_runs == ["finite-screen"] * 4  # the 4 batches of 16, as they came

    def not_again(preds: np.ndarray, batch_size: int) -> None:
        raise AssertionError("checked twice")

    monkeypatch.setattr(runner_module, "_check_finite", not_again)
    assert np.array_equal(predict(session, arrays["inputs"], SPEC, CPU_ONLY), expected)
    assert not screen_threads()


def test_nan_screened_during_the_runs_still_names_its_batch(
    screened_during_runs: list[str],
) -> None:
    arrays = digits_like(n=50)
    arrays["inputs"][40, 0, 0, 0] = -1.0
    with pytest.raises(EvaluationError) as caught:
        evaluate(sqrt_model(), Dataset.from_arrays(arrays), SPEC, CPU_ONLY)
    assert str(caught.value) == "The model's output contains NaN or infinity (batch 3)."
    # The screen stopped at batch 3; the check after the loop named the batch.
    assert screened_during_runs == ["finite-screen"] * 3 + ["MainThread"]
    assert not screen_threads()


def test_screen_thread_ends_when_the_loop_fails(screened_during_runs: list[str]) -> None:
    session = create_session(sqrt_model(), CPU_ONLY)

    def stop_at_two(fraction: float) -> None:
        if fraction >= 0.5:
            raise ConnectionError("the database refused the progress update")

    with pytest.raises(ConnectionError, match="refused"):
        predict(session, digits_like(n=50)["inputs"], SPEC, CPU_ONLY, progress=stop_at_two)
    assert not screen_threads()


def test_no_screen_thread_leaves_the_check_to_after_the_loop(
    screened_during_runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    start = threading.Thread.start

    def refuse(self: threading.Thread) -> None:
        if self.name == "finite-screen":  # the watchdog's thread, say, still starts
            raise RuntimeError("can't start new thread")
        start(self)

    monkeypatch.setattr(runner_module.threading.Thread, "start", refuse)
    arrays = digits_like(n=50)
    arrays["inputs"][40, 0, 0, 0] = -1.0
    with pytest.raises(EvaluationError, match=r"NaN or infinity \(batch 3\)"):
        evaluate(sqrt_model(), Dataset.from_arrays(arrays), SPEC, CPU_ONLY)
    assert screened_during_runs == ["MainThread"]  # once, on everything, after the loop


def test_only_large_float_outputs_on_cuda_are_screened_during_the_runs() -> None:
    large = np.zeros((8, 448, 448), np.float32)
    assert runner_module._screens_during_runs(True, large)
    assert not runner_module._screens_during_runs(False, large)  # CPU: ORT has every core
    assert not runner_module._screens_during_runs(True, np.zeros((32, 10), np.float32))
    assert not runner_module._screens_during_runs(True, large.astype(np.float16))
    assert not runner_module._screens_during_runs(True, np.asfortranarray(large))


def test_sessions_never_fall_back_to_the_cpu_silently() -> None:
    # InferenceSession.run's fallback would print a line and re-run a failed CUDA run on the CPU,
    # under the provider the result already names.
    session = create_session(sqrt_model(), CPU_ONLY)
    assert session._enable_fallback is False


def test_the_scoring_loop_makes_the_bare_loops_call_inferencesession_run() -> None:
    # The public call, as a bare onnxruntime loop makes it (benchmarks.runner_overhead), not
    # onnxruntime's internals.
    session = create_session(sqrt_model(), CPU_ONLY)
    with TimeLimit(60) as limit:
        executor = runner_module._Executor(session, limit, CPU_ONLY)
    assert executor.run_cpu == session.run
    inputs = digits_like(n=50)["inputs"]
    batches = runner_module.padded_batches(inputs, SPEC.batch_size)
    by_hand = np.concatenate([session.run(None, {"input": b})[0] for b in batches])[:50]
    called: list[int] = []

    def run(*args: Any) -> Any:
        called.append(len(args))
        return ort.InferenceSession.run(session, *args)

    session.run = run  # type: ignore[method-assign]
    preds = predict(session, inputs, SPEC, CPU_ONLY)
    assert called == [3] * (CPU_ONLY.warmup_runs + len(batches))  # names, feed, RunOptions
    assert np.array_equal(preds, by_hand)
    del session.run
    # A failing run still reads as the model's failure, named by onnxruntime.
    with pytest.raises(EvaluationError, match=r"The model failed while running: .*input"):
        predict(session, inputs.reshape(50, 64, 1, 1), SPEC, CPU_ONLY)


def test_an_output_that_is_not_the_batchs_shape_is_refused_whatever_the_batch() -> None:
    # Outputs whose rows differ from batch to batch but add up to the batches' rows: one
    # concatenation alone would not show it, the row count of each output does.
    spec = replace(SPEC, output_shape=(8,))
    rows = [np.zeros((15, 8), np.float32), np.zeros((17, 8), np.float32)]
    with pytest.raises(EvaluationError, match=r"shape \[15, 8\] but this task expects \[16, 8\]"):
        runner_module._gathered(rows, 30, spec)
    ranks = [np.zeros((16, 8), np.float32), np.zeros((16, 8, 1), np.float32)]
    with pytest.raises(EvaluationError, match=r"shape \[16, 8, 1\] but"):
        runner_module._gathered(ranks, 30, spec)
    scalar = [np.zeros((16, 8), np.float32), np.ones((), np.float32)]
    with pytest.raises(EvaluationError, match=r"shape \[\] but"):
        runner_module._gathered(scalar, 30, spec)
    good = [np.ones((16, 8), np.float32), np.zeros((16, 8), np.float32)]
    assert runner_module._gathered(good, 30, spec).shape == (30, 8)


def test_a_fast_models_loop_asks_nothing_between_batches() -> None:
    # Whether to give way, and the progress, are asked at checkpoints CHECK_EVERY_S apart; a
    # loop shorter than that asks only before its warm-up, and reports no progress.
    asked: list[str] = []

    class Gate:
        def due(self) -> bool:
            asked.append("due")
            return False

        def give_way(self, limit_s: float) -> float:
            return 0.0

    session = create_session(sqrt_model(), CPU_ONLY)
    turn = runner_module.GiveWay(Gate(), 10.0)
    predict(session, digits_like(n=50)["inputs"], SPEC, CPU_ONLY, asked.append, turn)  # type: ignore[arg-type]
    assert asked == ["due"]
