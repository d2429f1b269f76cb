"""What this CPU is: its name and the instruction sets the engine's kernels depend on."""

from __future__ import annotations

from functools import cache
from pathlib import Path

# oneDNN and ATen pick other kernels with each of these (AMX tiles, native bf16, AVX-512)
KERNEL_FLAGS = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")


@cache
def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    return {
        k.strip(): v.strip() for k, _, v in (line.partition(":") for line in first.splitlines())
    }


def cpu_flags() -> set[str]:
    return set(_cpuinfo().get("flags", "").split())


def cpu_has_fast_bf16() -> bool:
    """bf16 beats fp32 only with native instructions; emulated, it is slower at batch 8+."""
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


def cpu_summary() -> str:
    """e.g. 'Intel(R) Xeon(R) Processor @ 2.80GHz (avx512f)'."""
    name = _cpuinfo().get("model name", "unknown CPU")
    flags = [f for f in KERNEL_FLAGS if f in cpu_flags()]
    return f"{name} ({flags[0] if flags else 'no AVX2'})"
