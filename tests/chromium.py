"""Where the browser tests find Chromium, and what they say when it is missing.

They fail rather than skip: a skipped browser test on a fresh machine would pass `make test`
without testing what CI tests. `make test` installs Chromium first where it can
(.ci/install-browser); running pytest alone on a machine without it names the command.
"""

from __future__ import annotations

import shutil

import pytest

INSTALL_COMMAND = "sudo apt-get install -y chromium"
MISSING = (
    "Chromium is missing, and the browser tests need it. Install it with: "
    f"{INSTALL_COMMAND}  (`make test` installs it by itself when run as root)"
)


def chromium_or_fail() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(MISSING, pytrace=False)
    return path
