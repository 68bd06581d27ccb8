"""The Kubernetes manifests (deploy/kubernetes), checked without a cluster: the rendered overlays
match their sources, every object matches the Kubernetes or KEDA schema, and the rules of
docs/kubernetes.md hold (non-root, grace periods, GPU requests, scaler queues, secrets, network)."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from evaluation.timing import TimingProtocol
from queueing.queues import queue_name
from submissions.lifecycle.services import STOP_MARGIN_S, job_timeout_s
from submissions.models import Task

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if p.is_dir())
KUBERNETES_VERSION = "1.30.0"  # the oldest minor release still maintained upstream
SECRET_DIR = "/run/secrets/portal"
POD_KINDS = {"Deployment", "StatefulSet", "Job"}


def rendered(overlay: str) -> list[dict[str, Any]]:
    text = (K8S / "rendered" / f"{overlay}.yaml").read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def objects(overlay: str, kind: str) -> list[dict[str, Any]]:
    return [doc for doc in rendered(overlay) if doc["kind"] == kind]


def named(overlay: str, kind: str, name: str) -> dict[str, Any]:
    (found,) = [doc for doc in objects(overlay, kind) if doc["metadata"]["name"] == name]
    return found


def pod_specs(overlay: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in rendered(overlay):
        if doc["kind"] in POD_KINDS:
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def workers(overlay: str) -> list[dict[str, Any]]:
    return [
        doc
        for doc in objects(overlay, "Deployment")
        if doc["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"
    ]


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


def worker_container(deployment: dict[str, Any]) -> dict[str, Any]:
    (worker,) = [c for c in deployment["spec"]["template"]["spec"]["containers"]]
    return worker


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a Kubernetes label selector matches these labels (matchLabels, In/Exists)."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        if operator == "In" and labels.get(key) not in expression["values"]:
            return False
        if operator == "Exists" and key not in labels:
            return False
    return True


def keda_schema(kind: str) -> dict[str, Any]:
    schemas = yaml.safe_load((K8S / "schemas" / "keda.yaml").read_text())
    return {**schemas[kind], "definitions": schemas["definitions"]}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kustomize comes with kubectl")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_overlay_is_what_kustomize_makes_of_the_sources(overlay: str) -> None:
    made = subprocess.run(
        ["kubectl", "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert list(yaml.safe_load_all(made)) == rendered(overlay), "run deploy/kubernetes/render.sh"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_kubernetes_object_matches_the_official_schema(overlay: str) -> None:
    for doc in rendered(overlay):
        if doc["apiVersion"].startswith("keda.sh/"):
            continue
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_keda_object_matches_the_vendored_crd_schema(overlay: str) -> None:
    keda = [doc for doc in rendered(overlay) if doc["apiVersion"].startswith("keda.sh/")]
    assert {doc["kind"] for doc in keda} == {"ScaledObject", "TriggerAuthentication"}
    for doc in keda:
        jsonschema.validate(doc, keda_schema(doc["kind"]))


def test_the_vendored_keda_schema_refuses_a_misspelt_field() -> None:
    scaled = copy.deepcopy(named("trial", "ScaledObject", "portal-worker-gpu"))
    scaled["spec"]["minReplicas"] = scaled["spec"].pop("minReplicaCount")  # the HPA's name
    with pytest.raises(jsonschema.ValidationError, match="minReplicas"):
        jsonschema.validate(scaled, keda_schema("ScaledObject"))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_as_non_root_with_no_capabilities_and_a_read_only_root(
    overlay: str,
) -> None:
    for name, spec in pod_specs(overlay):
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0, name
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["automountServiceAccountToken"] is False, name
        for container in containers(spec):
            security = container["securityContext"]
            assert security["runAsNonRoot"] is True, (name, container["name"])
            assert security["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert security["capabilities"]["drop"] == ["ALL"], (name, container["name"])
            assert security["readOnlyRootFilesystem"] is True, (name, container["name"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_resource_requests_and_limits(overlay: str) -> None:
    for name, spec in pod_specs(overlay):
        for container in containers(spec):
            resources = container["resources"]
            for kind in ("cpu", "memory"):
                assert kind in resources["requests"] and kind in resources["limits"], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_stopped_worker_has_time_to_finish_the_longest_evaluation(overlay: str) -> None:
    default_limit = Task._meta.get_field("time_limit_s").get_default()
    for deployment in workers(overlay):
        longest = int(deployment["metadata"]["annotations"]["portal/longest-time-limit-s"])
        assert longest >= default_limit
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        job_s = job_timeout_s(time_limit_s=longest, timing=TimingProtocol())  # its defaults
        assert grace >= job_s + STOP_MARGIN_S, deployment["metadata"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gpu_pools_request_one_gpu_on_gpu_nodes_and_cpu_pools_none(overlay: str) -> None:
    devices = set()
    for deployment in workers(overlay):
        spec = deployment["spec"]["template"]["spec"]
        worker = worker_container(deployment)
        device = env_of(worker)["EVAL_DEVICE"]
        devices.add(device)
        gpus = worker["resources"]["limits"].get("nvidia.com/gpu")
        if device == "cuda":
            assert gpus == "1" and worker["resources"]["requests"]["nvidia.com/gpu"] == "1"
            assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
                "tolerations"
            ]
        else:
            assert device == "cpu" and gpus is None and "nodeSelector" not in spec
    assert devices == {"cpu", "cuda"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_worker_pool_is_scaled_by_the_queue_of_its_one_device_class(overlay: str) -> None:
    scaled = {
        doc["spec"]["scaleTargetRef"]["name"]: doc for doc in objects(overlay, "ScaledObject")
    }
    assert set(scaled) == {doc["metadata"]["name"] for doc in workers(overlay)}
    for deployment in workers(overlay):
        name = deployment["metadata"]["name"]
        classes = env_of(worker_container(deployment))["EVAL_DEVICE_CLASSES"].split(",")
        assert len(classes) == 1, f"{name}: one device class per pool, one queue per scaler"
        assert deployment["metadata"]["annotations"]["portal/device-class"] == classes[0]
        (trigger,) = scaled[name]["spec"]["triggers"]
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["listName"] == f"rq:queue:{queue_name(classes[0])}"
        assert trigger["metadata"]["addressFromEnv"] == "REDIS_ADDRESS"
        assert trigger["authenticationRef"]["name"] == "portal-redis"
    assert scaled["portal-worker-gpu"]["spec"]["minReplicaCount"] == 0
    assert scaled["portal-worker-gpu"]["spec"]["cooldownPeriod"] >= 300
    # One CPU worker stays: it runs the fleet's recovery while the GPU pools are at zero.
    assert scaled["portal-worker-cpu"]["spec"]["minReplicaCount"] >= 1
    assert queue_name("cpu") == "evaluation" and queue_name("gpu") == "evaluation-gpu"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_secret_file_variable_points_into_the_mounted_secret(overlay: str) -> None:
    config = named(overlay, "ConfigMap", "portal-config")["data"]
    files = {name: path for name, path in config.items() if name.endswith("_FILE")}
    assert {"SECRET_KEY_FILE", "DATABASE_URL_FILE", "REDIS_URL_FILE"} <= set(files)
    keys = {path.removeprefix(f"{SECRET_DIR}/") for path in files.values()}
    assert all(path.startswith(f"{SECRET_DIR}/") for path in files.values())
    for name, spec in pod_specs(overlay):
        if not name.startswith("portal-"):
            continue
        volumes = {v["name"]: v for v in spec["volumes"]}
        for container in containers(spec):
            (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == SECRET_DIR]
            assert volumes[mount["name"]]["secret"]["secretName"] == "portal-secrets"
    auth = named(overlay, "TriggerAuthentication", "portal-redis")["spec"]["secretTargetRef"]
    keys |= {ref["key"] for ref in auth}
    if overlay == "trial":  # generated in the overlay
        assert keys <= set(named(overlay, "Secret", "portal-secrets")["data"])
    else:  # created out of band, by the command in docs/kubernetes.md
        guide = (ROOT / "docs" / "kubernetes.md").read_text()
        command = re.search(
            r"kubectl -n portal create secret generic portal-secrets.*?\n\n", guide, re.S
        )
        assert command and keys <= set(re.findall(r"--from-file=([a-z0-9-]+)=", command.group(0)))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_web_and_workers_wait_for_the_migration_job(overlay: str) -> None:
    job = named(overlay, "Job", "portal-migrate")["spec"]["template"]["spec"]
    assert job["containers"][0]["command"][-3:] == ["manage.py", "migrate", "--noinput"]
    for deployment in objects(overlay, "Deployment"):
        spec = deployment["spec"]["template"]["spec"]
        (wait,) = spec["initContainers"]
        assert "manage.py migrate --check" in wait["command"][-1]
        assert wait["image"] == spec["containers"][0]["image"], "same code as it waits for"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_web_scales_on_cpu_keeps_one_pod_through_disruptions_and_probes_healthz(
    overlay: str,
) -> None:
    web = named(overlay, "Deployment", "portal-web")
    assert named(overlay, "HorizontalPodAutoscaler", "portal-web")["spec"]["minReplicas"] >= 2
    assert named(overlay, "PodDisruptionBudget", "portal-web")["spec"]["minAvailable"] >= 1
    container = web["spec"]["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
    for deployment in workers(overlay):
        worker = worker_container(deployment)
        for probe in ("startupProbe", "livenessProbe"):
            assert worker[probe]["exec"]["command"] == ["/app/docker/worker-healthcheck.sh"]


def _egress_ports(overlay: str, labels: dict[str, str]) -> set[int]:
    policies = objects(overlay, "NetworkPolicy")
    (deny,) = [p for p in policies if p["metadata"]["name"] == "default-deny"]
    assert deny["spec"]["podSelector"] == {} and deny["spec"]["policyTypes"] == [
        "Ingress",
        "Egress",
    ]
    ports: set[int] = set()
    for policy in policies:
        if not selects(policy["spec"]["podSelector"], labels):
            continue
        assert not policy["spec"].get("ingress"), f"{policy['metadata']['name']} lets in traffic"
        for rule in policy["spec"].get("egress", []):
            assert rule.get("to"), f"{policy['metadata']['name']}: egress to anywhere"
            ports |= {port["port"] for port in rule["ports"]}
    return ports


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_reach_only_dns_postgres_redis_and_s3_and_take_no_connections(
    overlay: str,
) -> None:
    s3_port = 9000 if overlay == "trial" else 443
    for deployment in workers(overlay):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert _egress_ports(overlay, labels) == {53, 5432, 6379, s3_port}
