"""x @ W.T (+ b) with W reordered once into oneDNN's blocked layout, for the decode engine.

On a 2-core CPU a bf16 `F.linear` over SmolLM2's layers takes 15 ms at 1 row and 24 ms
at 32 rows; the same products on pre-packed weights take 6 and 15 ms (same values, bit
for bit). The packed ops are the ones torch's own inductor uses for frozen CPU weights.
Which row counts give a row the same bits depends on the CPU (`row_plan`), so every call
goes through the plan the engine checked at start-up. Where the ops are missing (a torch
build without oneDNN, a dtype it cannot pack) this falls back to `F.linear`. A bias (Qwen2's
q/k/v) is added inside the same kernel call, so the checked plan covers it too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from infra.lm.engine.row_plan import ANY_ROWS, RowPlan


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


def packs(dtype: torch.dtype) -> bool:
    """Whether this CPU packs weights of `dtype`; where it does not, they are used as is."""
    return _pack(torch.zeros(16, 16, dtype=dtype)) is not None


class PackedLinear:
    """`linear(x)` = x @ W.T + bias, its rows grouped into kernel calls by `plan`."""

    def __init__(
        self, weight: torch.Tensor, bias: torch.Tensor | None = None, plan: RowPlan = ANY_ROWS
    ):
        self.packed = _pack(weight)
        self.weight = weight if self.packed is None else None  # keep one copy only
        self.bias = bias
        self.shape = tuple(weight.shape)
        self.dtype = weight.dtype
        self.plan = plan

    @property
    def key(self) -> tuple:
        """What picks the kernels of a call besides its row count: products with the same
        key run under the same checked plan (`invariance`)."""
        return (self.shape, self.dtype, "" if self.bias is None else "with bias")

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """One kernel call on exactly these rows."""
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.plan.apply(self.product, x)
