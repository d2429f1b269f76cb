"""Keep the heap from holding memory the process freed, and hand it back to the OS.

glibc keeps what a thread frees in that thread's arena for reuse rather than returning
it. After a prompt step of the demo night the process held 2,813 MiB resident, 1,638 MiB
after one `malloc_trim(0)`: over a gigabyte of free chunks that a weight step's training
would otherwise stack on top of. Trimming between stages does not reach the peaks inside
one, so `keep_heap_trimmed` also trims on a clock. Both are no-ops where the C library
has no `malloc_trim` (musl, macOS).

Tried and dropped (the demo night, Intel Xeon with AMX): glibc's own bounds,
`mallopt(M_MMAP_THRESHOLD, 4 MiB)` and `mallopt(M_ARENA_MAX, 2)`, held the prompt step to
7.2 GiB but the night took 33 minutes instead of 18: every big tensor mapped anew faults
its pages in again (173 million page faults, 500 s of system time), the prompt step took
341 s against 241 to 266 s, and LoRA training 38.6 s a step against 16.8 to 22.3 s.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import threading
import time

_libc_name = ctypes.util.find_library("c")
_libc = ctypes.CDLL(_libc_name) if _libc_name else None
_trim = getattr(_libc, "malloc_trim", None)


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
    chunks then stay resident for seconds, not for the rest of a stage; a trim holds each
    arena's lock for milliseconds once little is free, and pages it returned fault in
    again only where they are used again."""
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
