"""`make test` tests what CI tests (browser included); `make clean` stops what runs first."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.chromium import INSTALL_COMMAND, chromium_or_fail

ROOT = Path(__file__).resolve().parents[2]


def make_dry_run(target: str, *options: str) -> list[str]:
    """The commands `make TARGET` would run, in order (nothing is run)."""
    result = subprocess.run(
        ["make", "-n", *options, target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def index_of(lines: list[str], fragment: str) -> int:
    return next(i for i, line in enumerate(lines) if fragment in line)


def test_make_test_makes_sure_of_the_browser_before_running_the_tests() -> None:
    lines = make_dry_run("test")
    assert index_of(lines, "sh .ci/install-browser") < index_of(lines, "-m pytest")


def test_make_demo_checks_the_port_first_and_installs_no_development_extras() -> None:
    lines = make_dry_run("demo", "-B")  # -B: as on a fresh clone, whatever .venv holds
    assert index_of(lines, "rundemo --port 8000 --check-port") < index_of(lines, "migrate")
    assert not [line for line in lines if "[dev]" in line]
    assert any("pip install --quiet -e ." in line for line in lines)


def test_make_clean_stops_our_processes_before_deleting_var() -> None:
    lines = make_dry_run("clean")
    assert index_of(lines, "-m portal.pidfiles stop") < index_of(lines, "rm -rf var")


def test_without_chromium_and_root_the_install_script_names_the_command(tmp_path: Path) -> None:
    """A user who is not root on a machine without Chromium: no install, no silent skip."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_id = bin_dir / "id"
    fake_id.write_text("#!/bin/sh\necho 1000\n")
    fake_id.chmod(0o755)

    result = subprocess.run(
        ["/bin/sh", ".ci/install-browser"],
        cwd=ROOT,
        env={"PATH": str(bin_dir)},  # no chromium on it
        capture_output=True,
        text=True,
    )

    assert result.returncode == 1
    assert INSTALL_COMMAND in result.stderr


def test_the_browser_tests_fail_with_the_install_command_when_chromium_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(pytest.fail.Exception, match=INSTALL_COMMAND):
        chromium_or_fail()


def test_make_typecheck_starts_no_embedded_redis() -> None:
    """mypy imports the settings and leaves with os._exit, so it could never stop one."""
    (command,) = [line for line in make_dry_run("typecheck") if "mypy" in line]
    assert "REDIS_URL=" in command
