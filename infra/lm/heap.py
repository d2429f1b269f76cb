"""Keep the heap from holding memory the process freed, and hand it back to the OS.

glibc keeps what a thread frees in that thread's arena for reuse rather than returning
it. After a prompt step of the demo night the process held 2,813 MiB resident, 1,638 MiB
after one `malloc_trim(0)`: over a gigabyte of free chunks that a weight step's training
would otherwise stack on top of. Trimming between stages does not reach the peaks inside
one, so `keep_heap_trimmed` also trims on a clock. Both are no-ops where the C library
has no `malloc_trim` (musl, macOS).

Tried and dropped (the demo night, Intel Xeon with AMX): glibc's own bounds,
`mallopt(M_MMAP_THRESHOLD, 4 MiB)` and `mallopt(M_ARENA_MAX, 2)`, held the night to the
same peak as the trim (7.0 against 6.9 GiB) with 44% more page faults and 26% more
system time: every big tensor mapped anew faults its pages in again
(docs/benchmarks/2026-12-07-night-memory.md).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import threading
import time

_libc_name = ctypes.util.find_library("c")
_trim = getattr(ctypes.CDLL(_libc_name), "malloc_trim", None) if _libc_name else None


async def release_free_heap() -> bool:
    """Return free heap pages of every arena to the OS; whether any were returned. On a
    worker thread: trimming a few GiB takes a fifth of a second, which the event loop (and
    the request timeouts it keeps) must not wait out."""
    if _trim is None:
        return False
    return bool(await asyncio.to_thread(_trim, 0))


TRIM_EVERY_S = 10.0
_trimmer_lock = threading.Lock()
_trimmer: threading.Thread | None = None


def keep_heap_trimmed(every_s: float = TRIM_EVERY_S) -> bool:
    """Trim every arena every `every_s` seconds, on a thread of its own, for as long as
    the process lives (started once; later calls are no-ops); whether it runs. Freed
    chunks then stay resident for seconds, not for the rest of a stage: the demo night's
    prompt step peaked at 6.5 GiB against 8.3 GiB untrimmed. Pages it returned fault in
    again where they are used again; on four LoRA training steps, side by side, that cost
    no measurable time (`benchmarks/heap_trim.py`: 77.1 s trimmed, between 79.5 and
    69.7 s untrimmed)."""
    global _trimmer
    if _trim is None:
        return False
    with _trimmer_lock:
        if _trimmer is None:

            def trim_forever() -> None:
                while True:
                    time.sleep(every_s)
                    _trim(0)

            _trimmer = threading.Thread(target=trim_forever, name="heap-trim", daemon=True)
            _trimmer.start()
    return True
