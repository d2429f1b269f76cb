"""x @ W.T with W reordered once into oneDNN's blocked layout, for the decode step.

On this 2-core CPU a bf16 `F.linear` over SmolLM2's layers takes 15 ms at 1 row and
24 ms at 32 rows; the same products on pre-packed weights take 6 and 15 ms (same
values, bit for bit: benchmarks/local_lm.py shows the effect end to end). The packed ops
are the ones torch's own inductor uses for frozen CPU weights. A row's product is the
same bits whatever the number of rows, except with the residual add fused in, where a
single row takes another kernel that sums in another order: a single row is sent as two
(a one-row product is bound by reading the weights, so the second row is nearly free),
so a decode step does not change a row's numbers when the others finish. Where the ops
are missing (a torch build without oneDNN, a dtype it cannot pack) this falls back to
`F.linear`.
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
    """`linear(x)` = x @ W.T; `linear(x, add=r)` = r + x @ W.T, in one oneDNN call."""

    def __init__(self, weight: torch.Tensor):
        self.packed = _pack(weight)
        self.weight = weight if self.packed is None else None  # keep one copy only

    def __call__(self, x: torch.Tensor, add: torch.Tensor | None = None) -> torch.Tensor:
        if self.packed is None:
            return F.linear(x, self.weight) if add is None else torch.addmm(add, x, self.weight.t())
        if add is None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")
        if x.shape[0] == 1:  # see below: one row goes through as two
            x, add = x.expand(2, -1), add.expand(2, -1)
            return torch.ops.mkldnn._linear_pointwise.binary(x, add, self.packed, None, "add")[:1]
        return torch.ops.mkldnn._linear_pointwise.binary(x, add, self.packed, None, "add")
