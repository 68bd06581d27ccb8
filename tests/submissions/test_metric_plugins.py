"""A metric of a host's own (issue 35, item 5): a package installed in the environment registers
it under the ``onnx_eval_portal.metrics`` entry point group, and the registry, the scoring and the
admin's metric choice take it up with its label and direction. The package installed here is the
worked example of docs/operations.md, as a real distribution (a ``.dist-info`` folder on
``sys.path``), found by importlib.metadata as pip's would be."""

from __future__ import annotations

import importlib
import io
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client

from evaluation.metrics import (
    ENTRY_POINT_GROUP,
    MetricPluginError,
    compute_family,
    get_metric,
    metric_choices,
    metric_families,
    registry_reload,
)
from submissions.models import Task
from tests.submissions.test_admin import task_form

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
MODULE = "host_metrics"


def documented_example() -> str:
    """The python block that follows the example's marker in docs/operations.md."""
    text = DOCS.read_text()
    found = re.search(r"<!-- metric-plugin-example.*?-->\n```python\n(.*?)```", text, re.S)
    assert found, "the worked example is gone from docs/operations.md"
    return found.group(1)


def install(site: Path, module_source: str, entry_points: str) -> None:
    """A distribution as pip leaves it: its module, and a dist-info with its entry points."""
    (site / f"{MODULE}.py").write_text(module_source)
    info = site / "host_metrics-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: host-metrics\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Callable[[str, str], None]]:
    """Installs a package into a folder on sys.path; removes it again, whatever happened."""
    sys.path.insert(0, str(tmp_path))

    def put(module_source: str, entry_points: str) -> None:
        install(tmp_path, module_source, entry_points)
        importlib.invalidate_caches()
        registry_reload()

    try:
        yield put
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(MODULE, None)
        importlib.invalidate_caches()
        registry_reload()


def test_an_installed_metric_is_registered_with_its_label_direction_and_family(
    installed: Callable[[str, str], None],
) -> None:
    installed(documented_example(), "within_10pct = host_metrics:within_10pct")
    metric = get_metric("within_10pct")
    assert (metric.label, metric.direction.word) == ("Within 10 %", "higher")
    assert metric_families()["within_10pct"] == ("within_10pct",)
    predictions, targets = np.array([1.05, 2.5, 3.0, -4.2]), np.array([1.0, 2.0, 3.0, -4.0])
    assert compute_family("within_10pct", predictions, targets) == {"within_10pct": 0.75}
    assert ("within_10pct", "Within 10 % (within_10pct, higher is better)") in metric_choices()


def test_the_admin_lists_an_installed_metric_and_a_task_can_be_ranked_by_it(
    installed: Callable[[str, str], None], operator: Any
) -> None:
    installed(documented_example(), "within_10pct = host_metrics:within_10pct")
    console = Client()
    console.force_login(operator)
    page = console.get("/admin/submissions/task/add/").content.decode()
    assert '<option value="within_10pct">Within 10 % (within_10pct, higher is better)' in page
    rng = np.random.default_rng(0)
    arrays = {
        "inputs": rng.random((10, 1, 8, 8), dtype=np.float32),
        "targets": rng.random((10, 3), dtype=np.float32),
    }
    form = task_form(arrays, metric="within_10pct", output_shape="[3]")
    response = console.post("/admin/submissions/task/add/", form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    task = Task.objects.get()
    assert (task.metric_label, task.higher_is_better) == ("Within 10 %", True)


@pytest.mark.parametrize(
    ("entry_points", "message"),
    [
        ("within_10pct = host_metrics:nowhere", "cannot be loaded"),
        ("within_10pct = host_metrics:_within_10_percent", "is a function, not a Metric"),
        ("ten_percent = host_metrics:within_10pct", "the key must be the entry point's name"),
    ],
)
def test_a_broken_entry_point_is_refused_naming_it_and_its_package(
    installed: Callable[[str, str], None], entry_points: str, message: str
) -> None:
    installed(documented_example(), entry_points)
    with pytest.raises(MetricPluginError, match=message) as refused:
        get_metric("accuracy")
    assert "(from host-metrics)" in str(refused.value)


@pytest.mark.parametrize(
    ("field", "name", "message"),
    [
        ("key", "accuracy", "the key 'accuracy' is taken"),
        ("family", "regression", "the family 'regression' is a built-in one"),
    ],
)
def test_a_metric_may_not_take_a_built_in_key_or_family(
    installed: Callable[[str, str], None], field: str, name: str, message: str
) -> None:
    source = documented_example().replace(f'{field}="within_10pct"', f'{field}="{name}"')
    key = name if field == "key" else "within_10pct"
    installed(source, f"{key} = host_metrics:within_10pct")
    with pytest.raises(MetricPluginError, match=message):
        get_metric("mse")


def test_a_broken_metric_package_stops_the_start_naming_it(
    installed: Callable[[str, str], None],
) -> None:
    # The system checks (run by migrate, runserver, check) read Task.metric's choices.
    installed(documented_example(), "within_10pct = host_metrics:nowhere")
    with pytest.raises(MetricPluginError, match="within_10pct = host_metrics:nowhere"):
        call_command("check", stdout=io.StringIO())
