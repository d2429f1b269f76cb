"""How a product's rows are grouped into kernel calls, so that a row's bits never change.

oneDNN picks its matmul kernel by shape and ISA: on an AVX-512 Xeon without bf16, one row
goes through another kernel than two or more (its K=1536 product then differs in the last
bits); on an AMX Xeon, 33 rows take the AMX kernel while 8 do not. A request's numbers
would then depend on how many others share its decode step. A plan fixes the row counts
the kernel ever sees; `infra.lm.engine.invariance` checks which plan holds on this CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Product = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class RowPlan:
    """Calls get at least `min_rows` rows (zero rows pad the rest) and at most `max_rows`
    (more are split); with `tile`, every call gets exactly `tile` rows."""

    min_rows: int = 1
    max_rows: int = 512
    tile: int | None = None

    def apply(self, product: Product, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        step = self.tile or self.max_rows
        if not self.tile and self.min_rows <= n <= step:
            return product(x)
        parts = []
        for start in range(0, n, step):
            part = x[start : start + step]
            rows = part.shape[0]
            want = self.tile or max(self.min_rows, rows)
            if rows < want:
                part = torch.cat([part, part.new_zeros(want - rows, *part.shape[1:])])
            parts.append(product(part)[:rows])
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def describe(self) -> str:
        if self.tile == 1:
            return "one row per call"
        if self.tile:
            return f"calls of exactly {self.tile} rows"
        if self.min_rows > 1:
            return f"at least {self.min_rows} rows per call"
        return "any number of rows per call"


ANY_ROWS = RowPlan()
