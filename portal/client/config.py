"""Where ``oep`` keeps the portal URL and its API token: one JSON file only its owner can read.

``$OEP_CONFIG`` names the file; otherwise ``$XDG_CONFIG_HOME/oep/config.json`` (``~/.config``
when unset). ``$OEP_URL`` and ``$OEP_TOKEN`` override what the file holds, for CI jobs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from portal.client.errors import ClientError

DEFAULT_URL = "http://localhost:8000"


@dataclass(frozen=True)
class Config:
    url: str
    token: str
    path: Path


def config_path() -> Path:
    if os.environ.get("OEP_CONFIG"):
        return Path(os.environ["OEP_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "oep" / "config.json"


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ClientError(f"cannot read the configuration {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ClientError(f"the configuration {path} is not a JSON object")
    return {key: str(value) for key, value in data.items() if isinstance(value, str)}


def config_load() -> Config:
    path = config_path()
    stored = _read(path)
    url = os.environ.get("OEP_URL") or stored.get("url") or DEFAULT_URL
    token = os.environ.get("OEP_TOKEN") or stored.get("token", "")
    return Config(url=url.rstrip("/"), token=token, path=path)


def config_save(*, url: str, token: str) -> Path:
    """Write the file with mode 0600 from the start (never readable by others, not even briefly)."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps({"url": url.rstrip("/"), "token": token}, indent=2) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # an older file may have had a looser mode
        f.write(text)
    return path
