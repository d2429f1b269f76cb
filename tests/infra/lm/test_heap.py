"""release_free_heap: memory freed inside the heap goes back to the OS."""

import os

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
