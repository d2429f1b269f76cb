"""The decode engine's KV cache: preallocated per-layer buffers plus a validity mask.

A DynamicCache would `torch.cat` the whole cache on every step (at 32 rows x 300 tokens
that copy is as large as the weights read per step); the slab writes one column in place.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache


class KVSlab:
    """Preallocated K/V buffers [rows, kv_heads, cols, head_dim] for every layer.

    Active rows are 0..n-1 and active columns start..end-1. `valid[row, col]` says which
    columns hold a token of the row: a prompt prefilled after a shared prefix has padding
    between the two, so a row's tokens need not be contiguous. Position ids come from
    `length` (tokens held), never from the column, which is what lets rows share a prefix.
    The model calls `update` once per layer; we hand it views, never concatenations.
    """

    def __init__(self, n_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, rows: int):
        self.shape = (rows, kv_heads, 0, head_dim)
        self.n_layers, self.dtype = n_layers, dtype
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.valid = torch.zeros(rows, 0, dtype=torch.bool)
        self.first = torch.zeros(rows, dtype=torch.long)  # each row's first valid column
        self.length = torch.zeros(rows, dtype=torch.long)
        self.n = self.start = self.end = 0

    @property
    def cols(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, **_: Any):
        """Write the step's K/V at column `end` (`advance` moves `end` after the step)."""
        n, col = self.n, self.end
        self.keys[layer_idx][:n, :, col] = key[:, :, 0]
        self.values[layer_idx][:n, :, col] = value[:, :, 0]
        return (
            self.keys[layer_idx][:n, :, self.start : col + 1],
            self.values[layer_idx][:n, :, self.start : col + 1],
        )

    def step_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The 4D boolean mask and the position ids of the next decode step."""
        n = self.n
        self.valid[:n, self.end] = True
        return self.valid[:n, None, None, self.start : self.end + 1], self.length[:n, None]

    def advance(self) -> None:
        self.end += 1
        self.length[: self.n] += 1

    def append(self, cache: DynamicCache, valid: torch.Tensor, room: int) -> None:
        """Add prefilled rows (`valid` [rows, width] marks their tokens); keep `room` columns."""
        g, width = valid.shape
        if self.end - width < 0 or self.end + room > self.cols:
            self._relayout(max(0, width - (self.end - self.start)), room)
        if self.end - width < self.start:  # existing rows: their columns there are not theirs
            self.valid[: self.n, self.end - width : self.start] = False
            self.start = self.end - width
        rows, new = slice(self.n, self.n + g), slice(self.end - width, self.end)
        pad = ~valid[:, None, :, None]
        for layer, (keys, values) in enumerate(zip(self.keys, self.values, strict=True)):
            # Padding and stale slots must hold zeros: a masked NaN still poisons sdpa.
            keys[rows, :, self.start : new.start] = 0
            values[rows, :, self.start : new.start] = 0
            keys[rows, :, new] = cache.layers[layer].keys.masked_fill(pad, 0)
            values[rows, :, new] = cache.layers[layer].values.masked_fill(pad, 0)
        self.valid[rows, self.start : new.start] = False
        self.valid[rows, new] = valid
        self.first[rows] = new.start + valid.long().argmax(1)
        self.length[rows] = valid.sum(1)
        self.n += g

    def _relayout(self, shift: int, room: int) -> None:
        """Copy the active columns to `shift` in fresh buffers with `room` more free columns."""
        width, span = self.end - self.start, slice(self.start, self.end)
        rows, heads, _, dim = self.shape
        cols = max(64, int(1.25 * (shift + width + room)))

        def moved(old: torch.Tensor | None) -> torch.Tensor:
            new = torch.zeros(rows, heads, cols, dim, dtype=self.dtype)
            if old is not None:
                new[: self.n, :, shift : shift + width] = old[: self.n, :, span]
            return new

        self.keys = [moved(k) for k in self.keys or [None] * self.n_layers]
        self.values = [moved(v) for v in self.values or [None] * self.n_layers]
        valid = torch.zeros(rows, cols, dtype=torch.bool)
        valid[: self.n, shift : shift + width] = self.valid[: self.n, span]
        self.valid = valid
        self.first[: self.n] += shift - self.start
        self.start, self.end = shift, shift + width

    def remove(self, dead: list[int]) -> list[tuple[int, int]]:
        """Drop rows by moving the last live rows into their slots; returns (src, dst) moves."""
        dead_set = set(dead)
        n = self.n - len(dead)
        holes = sorted(d for d in dead if d < n)
        movers = [s for s in range(n, self.n) if s not in dead_set]
        moves = list(zip(movers, holes, strict=True))
        if moves:
            src, dst = torch.tensor(movers), torch.tensor(holes)
            cols = slice(self.start, self.end)
            for buf in (*self.keys, *self.values):
                buf[dst, :, cols] = buf[src, :, cols]
            self.valid[dst, cols] = self.valid[src, cols]
            self.first[dst] = self.first[src]
            self.length[dst] = self.length[src]
        self.n = n
        if n:  # columns left of every live row are padding for all: stop attending to them
            self.start = int(self.first[:n].min())
        else:  # free the memory while idle
            self.keys, self.values = [], []
            self.valid = self.valid[:, :0]
            self.start = self.end = 0
        return moves
