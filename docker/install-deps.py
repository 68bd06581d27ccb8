"""Install the project's runtime dependencies from pyproject.toml, with the images' pins.

    python install-deps.py pyproject.toml constraints.txt

The images install the dependencies only and run the code from /app, so that settings find
templates/ and static/ next to manage.py (an installed package would live in site-packages).

pip applies a constraint only to a package something requires, and says nothing about a pin
that matched nothing (a renamed package, a marker that left it out): such a pin would silently
stop holding. So after installing, every pin must be installed at exactly its version, and
`pip check` must find the installed set consistent; otherwise the build fails naming the pin.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from importlib import metadata
from pathlib import Path


def pins(constraints: Path) -> dict[str, str]:
    """``name==version`` lines of the constraints file, as {name: version}."""
    found: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                sys.exit(f"{constraints}: {line!r} is not a name==version pin")
            found[name.strip()] = version.strip()
    return found


def main() -> int:
    pyproject, constraints = Path(sys.argv[1]), Path(sys.argv[2])
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as requirements:
        requirements.write("\n".join(dependencies) + "\n")
        requirements.flush()
        pip = [sys.executable, "-m", "pip", "install", "--constraint", str(constraints)]
        subprocess.run([*pip, "-r", requirements.name], check=True)
    failures = []
    for name, version in pins(constraints).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            failures.append(f"{name}=={version} is pinned but was not installed")
            continue
        if installed != version:
            failures.append(f"{name}=={version} is pinned but {installed} was installed")
    for failure in failures:
        print(f"install-deps: {failure}", file=sys.stderr)
    if failures:
        return 1
    return subprocess.run([sys.executable, "-m", "pip", "check"], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
