"""The host's counted semaphore: at most ``count`` holders across threads and processes, a slot
freed the moment its holder ends, however it ends."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from plumbing.host_slots import SlotsFull, slot_held

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import sys, time
from pathlib import Path
from plumbing.host_slots import slot_held
with slot_held(Path(sys.argv[1]), int(sys.argv[2])):
    print("holding", flush=True)
    time.sleep(600)
"""


def test_count_holders_at_once_and_the_next_is_refused(tmp_path: Path) -> None:
    held = slot_held(tmp_path, 2), slot_held(tmp_path, 2)
    with held[0], held[1], pytest.raises(SlotsFull), slot_held(tmp_path, 2):
        pass
    with slot_held(tmp_path, 2):  # both given back
        pass


def test_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    outcomes: list[str] = []
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with slot_held(tmp_path, 1):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        try:
            with slot_held(tmp_path, 1):
                outcomes.append("taken")
        except SlotsFull:
            outcomes.append("full")
    finally:
        release.set()
        holder.join(10)
    assert outcomes == ["full"]


def test_a_waiter_takes_a_slot_freed_during_its_wait(tmp_path: Path) -> None:
    release = threading.Event()

    def hold_briefly() -> None:
        with slot_held(tmp_path, 1):
            release.set()
            time.sleep(0.5)

    holder = threading.Thread(target=hold_briefly)
    holder.start()
    assert release.wait(10)
    with slot_held(tmp_path, 1, wait_s=10):
        pass
    holder.join(10)


def test_a_slot_held_by_another_process_counts_and_is_freed_when_it_is_killed(
    tmp_path: Path,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        with pytest.raises(SlotsFull), slot_held(tmp_path, 1):
            pass
    finally:
        holder.kill()  # no chance to release anything itself
        holder.wait(10)
    with slot_held(tmp_path, 1):
        pass
