"""The house's layers: imports only point down (../shared/design.md, "Layout and layers").

engine       evaluation/: pure evaluation, no Django, no Redis, no database
plumbing     queueing/ (queue names, connections, worker presence), plumbing/ (API helpers)
domain       accounts/, submissions/ (models, lifecycle, tasks, boards, teams, notifications)
workers      workers/: the rq worker, jobs, dispatch, recovery, fleet, metrics, the GPU check
web          views, APIs, admin, forms, URLs, template tags, management commands
project      portal/: settings, root URLs, the demo runner, the command-line client

Nothing shipped imports benchmarks/ or tests/. Each rule is checked on every import statement of
every module (module level or inside a function).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("evaluation", "queueing", "plumbing", "accounts", "submissions", "workers", "portal")
ENGINE, PLUMBING, DOMAIN, WORKERS, WEB, PROJECT = range(6)
WEB_MODULES = {
    "accounts": (
        "views",
        "apis",
        "api_urls",
        "urls",
        "forms",
        "admin",
        "api_serializers",
        "schema",
        "authentication",
    ),
    "workers": ("views", "apis", "urls"),
}
# The app's wiring (AppConfig.ready) and its entry points sit on top of its own layers.
WEB_PACKAGES = ("web", "admin", "templatetags", "management", "apps")


def layer(module: str) -> int | None:
    """The layer of a product module (dotted name); None outside the product."""
    parts = module.split(".")
    top = parts[0]
    if top not in PRODUCT:
        return None
    if top == "evaluation":
        return ENGINE
    if top in ("queueing", "plumbing"):
        return PLUMBING
    if top == "portal":
        return PROJECT
    if len(parts) > 1 and (parts[1] in WEB_PACKAGES or parts[1] in WEB_MODULES.get(top, ())):
        return WEB
    return WORKERS if top == "workers" else DOMAIN


def modules() -> Iterator[tuple[str, Path]]:
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            yield dotted.removesuffix(".__init__"), path


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_imports_only_point_down() -> None:
    upward = []
    for module, path in modules():
        own = layer(module)
        assert own is not None
        for imported in set(imports(path)):
            theirs = layer(imported)
            if theirs is not None and theirs > own and not _is_package_of(imported, module):
                upward.append(f"{module} ({own}) imports {imported} ({theirs})")
    assert upward == []


def _is_package_of(imported: str, module: str) -> bool:
    return module.startswith(imported + ".")


@pytest.mark.parametrize("forbidden", ["benchmarks", "tests"])
def test_nothing_shipped_imports_benchmarks_or_tests(forbidden: str) -> None:
    found = [
        f"{module} imports {name}"
        for module, path in modules()
        for name in imports(path)
        if name == forbidden or name.startswith(forbidden + ".")
    ]
    assert found == []


def test_the_engine_imports_nothing_of_django_redis_or_rq() -> None:
    found = [
        f"{module} imports {name}"
        for module, path in modules()
        if layer(module) == ENGINE
        for name in imports(path)
        if name.split(".")[0] in ("django", "rest_framework", "redis", "rq", "django_rq")
    ]
    assert found == []
