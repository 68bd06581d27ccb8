"""``python -m benchmarks`` (``make bench``): issue 12's figures, ours against the bare-rq floor
in one interleaved run (``benchmarks/floor_bench.py``), each printing a Markdown table."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from benchmarks import floor_bench

    print("## Ours against the floor\n")
    floor_bench.main(sys.argv[1:])


if __name__ == "__main__":
    main()
