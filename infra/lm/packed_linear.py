"""x @ W.T with W reordered once into oneDNN's blocked layout, for the decode step.

On this 2-core CPU a bf16 `F.linear` over SmolLM2's layers takes 15 ms at 1 row and
24 ms at 32 rows; the same products on pre-packed weights take 6 and 15 ms (same
values, bit for bit: benchmarks/local_lm.py shows the effect end to end). The packed ops
are the ones torch's own inductor uses for frozen CPU weights, and a row's product is the
same bits whatever the number of rows in the call (oneDNN's fused residual add is not:
one row takes another kernel), so a decode step does not change a row's numbers when
the rows beside it come and go. Where the ops are missing (a torch build without oneDNN,
a dtype it cannot pack) this falls back to `F.linear`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _pack(weight: torch.Tensor) -> torch.Tensor | None:
    if not torch.backends.mkldnn.is_available() or weight.dtype not in (
        torch.bfloat16,
        torch.float32,
    ):
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous())
    except (RuntimeError, AttributeError):  # e.g. no bf16 support on this CPU
        return None


class PackedLinear:
    """`linear(x)` = x @ W.T."""

    def __init__(self, weight: torch.Tensor):
        self.packed = _pack(weight)
        self.weight = weight if self.packed is None else None  # keep one copy only

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return F.linear(x, self.weight)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")
