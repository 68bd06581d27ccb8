"""Web container healthcheck: GET /healthz (database and Redis reachable) answers 200."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

url = f"http://127.0.0.1:{os.environ.get('PORT', '8000')}/healthz"
try:
    with urllib.request.urlopen(url, timeout=5) as response:
        sys.exit(0 if response.status == 200 else 1)
except (urllib.error.URLError, OSError) as exc:
    sys.exit(f"{url}: {exc}")
