"""bound_heap and release_free_heap: memory freed inside the heap goes back to the OS."""

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


# In a process of its own: the holes other tests left in this one's heap would serve the
# big blocks before any mapping does, bounded or not.
GROWTH = """
import os, sys
from infra.lm import heap
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
if sys.argv[1] == "bounded":
    assert heap.bound_heap()
freed = b"\\x01" * (24 << 20)  # by default, freeing it lifts the mapping threshold past 5 MiB
del freed
before = resident()
big, small = [], []
for _ in range(40):  # 200 MiB of 5 MiB blocks, each with a live small one after it
    big.append(b"\\x01" * (5 << 20))
    small.append(bytes(4096))
del big
print(resident() - before)
"""


def kept_after_free(mode: str) -> float:
    """MiB still resident after 200 MiB of big blocks were freed, without a trim."""
    root = Path(__file__).parents[3]  # where `infra` imports from
    command = [sys.executable, "-c", GROWTH, mode]
    run = subprocess.run(command, capture_output=True, text=True, cwd=root)
    assert run.returncode == 0, run.stderr
    return float(run.stdout)


@pytest.mark.skipif(heap._mallopt is None, reason="no mallopt in this C library")
def test_big_blocks_freed_go_back_at_once_once_the_heap_is_bounded():
    assert kept_after_free("default") > 150  # glibc's own: kept in the heap
    assert kept_after_free("bounded") < 40
