"""release_free_heap and keep_heap_trimmed: memory freed inside the heap goes back to the OS."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.lm import heap


def resident_mib() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(heap._trim is None, reason="no malloc_trim in this C library")
async def test_freed_chunks_between_live_ones_are_returned():
    blocks = [bytes(8192) for _ in range(40_000)]  # ~320 MiB of malloc'd chunks
    keep = blocks[::4]  # live ones pin the heap's top: free() alone cannot shrink it
    del blocks
    before = resident_mib()
    assert await heap.release_free_heap()
    assert resident_mib() < before - 150  # the three freed blocks of every four
    assert len(keep) == 10_000


# In a process of its own: the trimmer is one per process, and lives as long as it.
FREED_AND_WAITED = """
import os, sys, time
from infra.lm import heap
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
if sys.argv[1] == "trimmed":
    assert heap.keep_heap_trimmed(every_s=0.2)
blocks = [b"\\x01" * 8192 for _ in range(40_000)]  # ~320 MiB of chunks in the heap
keep = blocks[::4]  # live ones pin the heap's top: free() alone cannot shrink it
before = resident()
del blocks
time.sleep(1.0)
print(before - resident())
"""


def returned_after_a_second(mode: str) -> float:
    """MiB given back to the OS within a second of freeing 240 MiB of heap chunks."""
    root = Path(__file__).parents[3]  # where `infra` imports from
    command = [sys.executable, "-c", FREED_AND_WAITED, mode]
    run = subprocess.run(command, capture_output=True, text=True, cwd=root)
    assert run.returncode == 0, run.stderr
    return float(run.stdout)


@pytest.mark.skipif(heap._trim is None, reason="no malloc_trim in this C library")
def test_freed_chunks_go_back_within_seconds_while_the_heap_is_kept_trimmed():
    assert returned_after_a_second("default") < 50  # glibc's own: kept in the heap
    assert returned_after_a_second("trimmed") > 150
