"""How ``oep`` prints: aligned tables, key-value blocks, a progress bar, local times."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from typing import IO, Any

FINAL = ("succeeded", "failed", "cancelled")


def local_time(iso: str | None) -> str:
    """An API timestamp in the user's own time zone, to the minute; "-" for none."""
    if not iso:
        return "-"
    try:
        return (
            datetime.fromisoformat(iso.replace("Z", "+00:00"))
            .astimezone()
            .strftime("%Y-%m-%d %H:%M %Z")
        )
    except ValueError:
        return iso


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: IO[str] = sys.stdout) -> None:
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def fields(pairs: Sequence[tuple[str, Any]], out: IO[str] = sys.stdout) -> None:
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        print(f"{key + ':':<{width + 1}} {value}", file=out)


class ProgressBar:
    """On a terminal a bar redrawn in place; otherwise one line per change of state or tenth."""

    WIDTH = 30

    def __init__(self, out: IO[str] = sys.stderr) -> None:
        self.out = out
        self.tty = out.isatty()
        self.last = ""

    def show(self, submission: dict[str, Any]) -> None:
        status, progress = submission["status"], float(submission.get("progress") or 0.0)
        place = submission.get("queue_position")
        label = f"{status}, {place} ahead" if status == "queued" and place else status
        if self.tty:
            filled = round(self.WIDTH * progress)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            print(f"\r[{bar}] {progress:4.0%} {label:<24}", end="", file=self.out, flush=True)
            return
        line = f"{label} {int(progress * 10) * 10}%"
        if line != self.last:
            print(line, file=self.out, flush=True)
            self.last = line

    def close(self) -> None:
        if self.tty:
            print(file=self.out, flush=True)
