"""The vocabulary head in float32 for choice scoring, without a float32 copy of it.

Choice scores need float32 logits: in bf16 they are ~0.25 apart near 30, so "Yes" and
"No" would often tie exactly. A float32 copy of a bf16 head costs twice the head (0.93 GB
for Qwen2.5's 151,936 x 1,536), so the product converts the bf16 weight BLOCK vocabulary
rows at a time and multiplies each block in float32: the same logits as a float32 copy's
up to summation order (a bf16 x bf16 product is exact in float32), for a conversion pass
over the head per call (~0.5 s for that head on 2 busy AVX2 cores, beside a prefill of
seconds). The blocks are fixed, so a row's logits depend only on how many rows share the
call, which the plan checked at start-up fixes as for any other product (`invariance`).
"""

from __future__ import annotations

import torch

from infra.lm.engine.row_plan import ANY_ROWS, RowPlan

BLOCK = 4096  # vocabulary rows converted at a time: 25 MB in float32 at hidden 1,536


class ScoreHead:
    """`head(x)` = float32(x) @ float32(W).T, W kept in its own dtype."""

    def __init__(self, weight: torch.Tensor, plan: RowPlan = ANY_ROWS):
        self.weight = weight
        self.shape = tuple(weight.shape)
        self.dtype = torch.float32  # what the rows arrive in and the logits leave in
        self.plan = plan

    @property
    def key(self) -> tuple:
        """Products with the same key run under the same checked plan (`invariance`)."""
        source = str(self.weight.dtype).removeprefix("torch.")
        return (self.shape, self.dtype, f"in blocks of {BLOCK} from {source}")

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """One call on exactly these rows: a fixed sequence of block products."""
        x = x.float()
        vocab, hidden = self.shape
        # Each block is converted into the same buffer (a fresh one per block left 0.9 GB
        # of heap behind for Qwen2.5's head) and multiplied into its rows of the logits,
        # kept transposed so that a block's rows are contiguous.
        logits = torch.empty(vocab, x.shape[0])
        buffer = torch.empty(min(BLOCK, vocab), hidden)
        for start in range(0, vocab, BLOCK):
            end = min(start + BLOCK, vocab)
            block = buffer[: end - start].copy_(self.weight[start:end])
            torch.mm(block, x.T, out=logits[start:end])
        return logits.T.contiguous()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.plan.apply(self.product, x)
