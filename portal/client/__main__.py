"""``python -m portal.client``: the same as the ``oep`` console script."""

from __future__ import annotations

import sys

from portal.client.cli import main

sys.exit(main())
