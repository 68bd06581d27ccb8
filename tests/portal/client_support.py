"""Running ``oep`` as a participant would: a separate process, with its own configuration file."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)


@dataclass(frozen=True)
class Oep:
    """``oep`` for one test: its config file lives in ``home``; ``url``/``token`` go to the env."""

    home: Path
    url: str = ""
    token: str = ""

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OEP_", "DJANGO_"))}
        env["OEP_CONFIG"] = str(self.home / "oep.json")
        if self.url:
            env["OEP_URL"] = self.url
        if self.token:
            env["OEP_TOKEN"] = self.token
        return {**env, **extra}

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "portal.client", *args]

    def __call__(
        self, *args: str, stdin: str = "", timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            input=stdin,
            capture_output=True,
            text=True,
            cwd=BASE_DIR,
            env=self.env(),
            timeout=timeout,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=BASE_DIR,
            env=self.env(),
        )
