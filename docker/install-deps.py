"""Write the project's runtime dependencies from pyproject.toml as a requirements file.

The images install the dependencies only and run the code from /app, so that settings find
templates/ and static/ next to manage.py (an installed package would live in site-packages).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

project = tomllib.loads(Path(sys.argv[1]).read_text())["project"]
Path(sys.argv[2]).write_text("\n".join(project["dependencies"]) + "\n")
