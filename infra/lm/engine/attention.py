"""The engine's attention: prompts one chunk at a time, decode steps over the KV slab.

A request's numbers must not depend on what it is batched with, so every sum a row's
result goes through has a shape that the row alone decides:
- a prompt attends in chunks of CHUNK queries at fixed positions (0-63, 64-127, ...), each
  chunk with its own keys only, so a prompt prefilled whole, after a cached prefix (whose
  length is a multiple of CHUNK) or beside other prompts runs the same kernel calls;
- a decode step reads each row's keys at columns 0..length-1 of the slab (left-aligned),
  padded with masked zeros to the slab's width. Whether the padding changes the sums
  depends on the kernels: `one_shot` (one matmul over all columns) holds on the CPUs
  checked so far, `blocked` sums fixed blocks of BLOCK columns in a fixed order (a
  sequential `cumsum`, where trailing zero blocks add exactly nothing) and holds by
  construction of its reductions, `per_row` slices each row to its own length.
  `infra.lm.engine.invariance` picks the first that holds on this CPU.
Queries arrive already scaled (the scale lives in q's weights) and grouped per K/V head.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import torch
import torch.nn.functional as F

CHUNK = 64  # prompt queries per attention call; cached prefixes are multiples of it
BLOCK = 64  # slab columns per block: the slab's width is a multiple of it

# (q [rows, kv_heads, group, dim], keys [rows, kv_heads, cols, dim], values, bias
# [rows, 1, 1, cols] of 0 or -inf, lengths [rows]) -> [rows, kv_heads, group, dim]
DecodeAttention = Callable[..., torch.Tensor]


def one_shot(q, keys, values, bias, lengths) -> torch.Tensor:
    # keys @ q^T, not q @ keys^T: bf16 bmm copies a transposed operand first
    scores = torch.matmul(keys, q.transpose(-1, -2)).transpose(-1, -2)
    weights = torch.softmax(scores.float() + bias, -1).to(values.dtype)
    return torch.matmul(weights, values)


def blocked(q, keys, values, bias, lengths) -> torch.Tensor:
    rows, kv_heads, cols, dim = keys.shape
    blocks = cols // BLOCK
    scores = torch.matmul(q[:, :, None], keys.view(rows, kv_heads, blocks, BLOCK, dim).mT)
    scores = scores.float().add_(bias.view(rows, 1, blocks, 1, BLOCK))  # [.., blocks, g, B]
    weights = scores.sub_(scores.amax((2, 4), keepdim=True)).exp_()
    total = weights.sum(-1).cumsum(2)[:, :, -1]
    parts = torch.matmul(weights.to(values.dtype), values.view(rows, kv_heads, blocks, BLOCK, dim))
    return (parts.cumsum(2)[:, :, -1].float() / total[..., None]).to(values.dtype)


def per_row(q, keys, values, bias, lengths) -> torch.Tensor:
    return torch.cat(
        [
            one_shot(q[r : r + 1], keys[r : r + 1, :, :n], values[r : r + 1, :, :n], 0.0, None)
            for r, n in enumerate(lengths.tolist())
        ]
    )


DECODE_KERNELS: dict[str, DecodeAttention] = {
    "one-shot": one_shot,
    "blocked": blocked,
    "per-row": per_row,
}


def chunks(start: int, end: int) -> list[tuple[int, int]]:
    """Positions [start, end) cut at multiples of CHUNK."""
    cuts = range((start // CHUNK + 1) * CHUNK, end, CHUNK)
    edges = [start, *cuts, end]
    return list(zip(edges, edges[1:], strict=False))


@lru_cache(maxsize=1024)
def _causal(first: int, n: int) -> torch.Tensor:
    """Which of keys 0..first+n-1 the queries at positions first..first+n-1 see."""
    return torch.arange(first + n) <= torch.arange(first, first + n)[:, None]


def prompt_chunk(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, first: int):
    """Queries at positions first.. of one prompt, q [n, heads, dim], over its keys
    [kv_heads, first + n, dim] (causal); returns [n, heads, dim]."""
    return F.scaled_dot_product_attention(
        q.transpose(0, 1)[None],
        keys[None],
        values[None],
        attn_mask=_causal(first, q.shape[0]),
        scale=1.0,
        enable_gqa=True,
    )[0].transpose(0, 1)
