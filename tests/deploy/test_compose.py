"""docker-compose.yml, the Dockerfiles and .env.example checked without a Docker engine: the
YAML parsed and inspected, and `docker compose config` where a Compose binary is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DJANGO_SERVICES = ["migrate", "web", "notifier", "worker-gpu0", "worker-gpu1", "worker-cpu"]
GPU_WORKERS = ["worker-gpu0", "worker-gpu1"]
LONG_RUNNING = [
    "postgres",
    "redis",
    "minio",
    "web",
    "notifier",
    "worker-gpu0",
    "worker-gpu1",
    "worker-cpu",
]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return dict(compose["services"])


def _env_example() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def _variables_read_by_the_code() -> set[str]:
    names: set[str] = set()
    for package in ("portal", "submissions", "evaluation", "docker"):
        for path in (ROOT / package).rglob("*.py"):
            if path.is_relative_to(ROOT / "portal" / "client"):
                continue  # oep's variables are the participant's (docs/cli.md), not the server's
            text = path.read_text()
            names |= set(re.findall(r"\benv_\w+\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']", text))
            names |= set(re.findall(r"os\.environ\.get\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']", text))
            # os.environ["X"] read, not assigned (rq sets RQ_JOB_ID for itself)
            names |= set(
                re.findall(r"os\.environ\[\s*[\"']([A-Z][A-Z0-9_]*)[\"']\s*\](?!\s*=[^=])", text)
            )
    return names


def test_the_stack_has_every_service_it_needs(services: dict[str, Any]) -> None:
    assert set(services) == {
        "postgres",
        "redis",
        "minio",
        "createbucket",
        "migrate",
        "web",
        "notifier",
        "worker-gpu0",
        "worker-gpu1",
        "worker-cpu",
    }


def test_state_lives_in_named_volumes_and_redis_appends_to_disk(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    assert "postgres-data:/var/lib/postgresql/data" in services["postgres"]["volumes"]
    assert "redis-data:/data" in services["redis"]["volumes"]
    assert "minio-data:/data" in services["minio"]["volumes"]
    command = services["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert {"postgres-data", "redis-data", "minio-data", "eval-cache"} <= set(compose["volumes"])


def test_long_running_services_have_healthchecks_and_restart_one_shots_do_not(
    services: dict[str, Any],
) -> None:
    for name in LONG_RUNNING:
        assert services[name]["restart"] == "unless-stopped", name
        assert services[name]["healthcheck"]["test"], name
    for name in ("createbucket", "migrate"):
        assert services[name]["restart"] == "no", name


def test_start_order_waits_for_health_migrations_and_the_bucket(services: dict[str, Any]) -> None:
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["createbucket"]["depends_on"]["minio"]["condition"] == "service_healthy"
    for name in ("web", *GPU_WORKERS, "worker-cpu"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["createbucket"]["condition"] == "service_completed_successfully", name


def test_bucket_is_created_on_start_and_kept_private(services: dict[str, Any]) -> None:
    script = services["createbucket"]["entrypoint"][-1]
    assert 'mc mb --ignore-existing "portal/$$AWS_STORAGE_BUCKET_NAME"' in script
    assert 'mc anonymous set none "portal/$$AWS_STORAGE_BUCKET_NAME"' in script


def test_every_django_service_gets_the_same_database_redis_and_s3(
    services: dict[str, Any],
) -> None:
    wiring = {
        "DATABASE_URL",
        "REDIS_URL",
        "SECRET_KEY",
        "STORAGE_BACKEND",
        "AWS_STORAGE_BUCKET_NAME",
        "AWS_S3_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    }
    reference = {k: services["web"]["environment"][k] for k in wiring}
    assert reference["STORAGE_BACKEND"] == "s3"
    assert "${POSTGRES_PASSWORD}" in reference["DATABASE_URL"]
    assert "${REDIS_PASSWORD}" in reference["REDIS_URL"]
    for name in DJANGO_SERVICES:
        env = services[name]["environment"]
        assert {k: env[k] for k in wiring} == reference, name


def test_gpu_workers_reserve_their_own_gpu_with_their_own_memory_fraction(
    services: dict[str, Any],
) -> None:
    device_ids = []
    for name in GPU_WORKERS:
        service = services[name]
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        device_ids.append(device["device_ids"][0])
        env = service["environment"]
        # The reserved GPU is the only one the container sees: CUDA ordinal 0.
        assert env["EVAL_GPU_INDEX"] == "0"
        assert re.fullmatch(
            r"\$\{EVAL_GPU\d_MEMORY_FRACTION:-0\.9\}", env["EVAL_GPU_MEMORY_FRACTION"]
        )
        assert env["WORKER_NAME_PREFIX"].endswith(name.removeprefix("worker-"))
        assert service["build"]["dockerfile"] == "docker/worker.Dockerfile"
        assert "eval-cache:/var/cache/portal" in service["volumes"]
    assert len(set(device_ids)) == len(device_ids)
    assert services["worker-gpu0"]["profiles"] == ["gpu"]


def test_cpu_profile_runs_a_worker_without_any_gpu(services: dict[str, Any]) -> None:
    worker = services["worker-cpu"]
    assert worker["profiles"] == ["cpu"]
    assert "deploy" not in worker
    assert worker["environment"]["EVAL_DEVICE"] == "cpu"
    assert worker["build"] == {
        "context": ".",
        "dockerfile": "docker/web.Dockerfile",
        "target": "worker-cpu",
    }
    dockerfile = (ROOT / "docker" / "web.Dockerfile").read_text()
    stage = dockerfile.split("FROM base AS worker-cpu", 1)[1].split("\nFROM ", 1)[0]
    assert 'ENTRYPOINT ["/app/docker/worker-entrypoint.sh"]' in stage
    assert "worker-healthcheck.sh" in stage and re.search(r"^USER portal$", stage, re.M)
    for name in ("postgres", "redis", "minio", "createbucket", "migrate", "web"):
        assert "profiles" not in services[name], name  # the core starts under every profile


def _seconds(duration: str) -> int:
    """A Compose duration such as "16m" or "1h30m", or ``${VAR:-16m}`` read at its default."""
    default = re.fullmatch(r"\$\{[A-Z0-9_]+:-([^}]+)\}", duration)
    text = default.group(1) if default else duration
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+)([hms])", text)
    assert parts and "".join(n + u for n, u in parts) == text, duration
    return sum(int(n) * units[u] for n, u in parts)


def test_a_stopping_worker_may_finish_the_longest_default_job(services: dict[str, Any]) -> None:
    # a stopping worker finishes its job first, then stops; compose must wait as long.
    from evaluation.timing import TimingProtocol
    from submissions.lifecycle.services import STOP_MARGIN_S, job_timeout_s
    from submissions.models import Task

    default_limit = Task._meta.get_field("time_limit_s").default
    # The protocol's defaults (the tests' own settings time briefly).
    job_s = job_timeout_s(time_limit_s=default_limit, timing=TimingProtocol())
    longest_job = job_s + STOP_MARGIN_S
    assert longest_job == 3 * 600 + 60 + 10 + 300 + 60
    for name in (*GPU_WORKERS, "worker-cpu"):
        assert _seconds(services[name]["stop_grace_period"]) >= longest_job, name
    assert "WORKER_STOP_GRACE_PERIOD=38m" in (ROOT / ".env.example").read_text()


def test_env_example_lists_every_variable_the_code_and_compose_file_read() -> None:
    listed = _env_example()
    assert {"SECRET_KEY", "EVAL_GPU_UUID", "WEB_CONCURRENCY"} <= _variables_read_by_the_code()
    assert _variables_read_by_the_code() - listed == set()
    compose_text = (ROOT / "docker-compose.yml").read_text()
    referenced = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", compose_text))
    assert referenced - listed == set()


def test_worker_image_runs_the_worker_class_as_non_root_on_a_matching_cuda_base() -> None:
    dockerfile = (ROOT / "docker" / "worker.Dockerfile").read_text()
    entrypoint = (ROOT / "docker" / "worker-entrypoint.sh").read_text()
    base = re.search(
        r"^ARG BASE_IMAGE=nvidia/cuda:(\d+)\.\d+\.\d+-cudnn-runtime-ubuntu", dockerfile, re.M
    )
    assert base, "the worker image must start from an NVIDIA CUDA + cuDNN runtime image"
    assert "--worker-class workers.worker.EvaluationWorker" in entrypoint
    assert "rqworker evaluation" in entrypoint
    assert re.search(r"^USER portal$", dockerfile, re.M)
    assert "HEALTHCHECK" in dockerfile
    pin = re.search(
        r"^onnxruntime-gpu==(\S+)$", (ROOT / "docker" / "constraints.txt").read_text(), re.M
    )
    assert pin, "docker/constraints.txt must pin onnxruntime-gpu"
    try:
        installed = metadata.version("onnxruntime-gpu")
    except metadata.PackageNotFoundError:
        pytest.skip("onnxruntime-gpu is not installed here: cannot read its CUDA requirement")
    if installed != pin.group(1):
        pytest.skip(f"onnxruntime-gpu {installed} installed here, {pin.group(1)} pinned")
    requires = metadata.requires("onnxruntime-gpu") or []
    cuda = [r for r in requires if r.startswith("nvidia-cuda-runtime")]
    assert cuda and re.search(rf"~={base.group(1)}\.", cuda[0]), (cuda, base.group(0))


def test_worker_image_build_loads_the_cuda_libraries_onnxruntime_needs() -> None:
    dockerfile = (ROOT / "docker" / "worker.Dockerfile").read_text()
    assert "python /tmp/build/check-cuda-libs.py" in dockerfile
    assert "in ort.get_available_providers()" not in dockerfile  # lists CUDA when it cannot load
    # Here (no CUDA libraries but libcudart) the check fails and names what is missing.
    done = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "check-cuda-libs.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        pytest.skip("every CUDA library loads on this machine")
    assert "cannot load libcudnn.so.9: libcudnn.so.9: cannot open shared object file" in done.stderr
    assert "libonnxruntime_providers_cuda.so links against missing" in done.stderr


def test_web_image_serves_with_gunicorn_as_non_root_with_a_healthcheck() -> None:
    dockerfile = (ROOT / "docker" / "web.Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=debian:bookworm", dockerfile, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\} AS base$", dockerfile, re.M)
    assert dockerfile.rstrip().split("\nFROM ")[-1].startswith("base AS web\n")  # the default
    assert re.search(r"^USER portal$", dockerfile, re.M)
    assert "collectstatic --noinput" in dockerfile
    assert "STATICFILES_MANIFEST=1" in dockerfile
    assert "HEALTHCHECK" in dockerfile and "web-healthcheck.py" in dockerfile
    assert '"gunicorn", "--config", "/app/docker/gunicorn.conf.py"' in dockerfile


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_docker_compose_config_accepts_the_file_with_every_profile() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("no Compose binary here (neither `docker compose` nor `docker-compose`)")
    result = subprocess.run(
        [
            *command,
            "--env-file",
            ".env.example",
            "--profile",
            "gpu",
            "--profile",
            "gpu1",
            "--profile",
            "cpu",
            "config",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)["services"]
    assert set(resolved) >= {"web", "worker-gpu0", "worker-gpu1", "worker-cpu", "minio"}
    (device,) = resolved["worker-gpu0"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["device_ids"] == ["0"] and device["driver"] == "nvidia"
    env = resolved["worker-gpu0"]["environment"]
    assert env["DATABASE_URL"] == "postgres://portal:change-me@postgres:5432/portal"
    assert env["REDIS_URL"] == "redis://:change-me@redis:6379/0"
    assert env["AWS_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert env["EVAL_GPU_MEMORY_FRACTION"] == "0.9"
