"""The decode engine's KV cache: preallocated per-layer buffers plus a validity mask.

A DynamicCache would `torch.cat` the whole cache on every step (at 32 rows x 300 tokens
that copy is as large as the weights read per step); the slab writes one column in place.
"""

from __future__ import annotations

from typing import Any

import torch

from infra.lm.prefix import Layers

GROWTH = 16  # free columns added when the buffers fill up


class KVSlab:
    """Preallocated K/V buffers [rows, kv_heads, cols, head_dim] for every layer.

    Active rows are 0..n-1. Every step attends over all `cols` columns: the buffers'
    leading rows are then one contiguous block, which bf16 bmm reads in place, whereas a
    column window is a strided view it first copies (that copy was 10% of a 25-row step).
    Columns a row does not hold are masked, and hold zeros: a masked NaN still poisons
    the weighted sum. When the columns run out, `_relayout` drops the columns left of
    every live row and adds GROWTH free ones, so at most GROWTH - 1 columns are idle.

    `valid[row, col]` says which columns hold a token of the row: a prompt prefilled
    after a shared prefix has padding between the two, so a row's tokens need not be
    contiguous. Position ids come from `length` (tokens held), never from the column,
    which is what lets rows share a prefix. The model calls `update` once per layer.
    """

    def __init__(self, n_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, rows: int):
        self.shape = (rows, kv_heads, 0, head_dim)
        self.n_layers, self.dtype = n_layers, dtype
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.valid = torch.zeros(rows, 0, dtype=torch.bool)
        self.first = torch.zeros(rows, dtype=torch.long)  # each row's first valid column
        self.length = torch.zeros(rows, dtype=torch.long)
        self.n = self.end = 0  # rows in use; the column the next step writes

    @property
    def cols(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, **_: Any):
        """Write the step's K/V at column `end` (`advance` moves `end` after the step)."""
        n, col = self.n, self.end
        self.keys[layer_idx][:n, :, col] = key[:, :, 0]
        self.values[layer_idx][:n, :, col] = value[:, :, 0]
        return self.keys[layer_idx][:n], self.values[layer_idx][:n]

    def step_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The 4D boolean mask and the position ids of the next decode step."""
        if self.end == self.cols:
            self._relayout(0)
        n = self.n
        self.valid[:n, self.end] = True
        return self.valid[:n, None, None, :], self.length[:n, None]

    def advance(self) -> None:
        self.end += 1
        self.length[: self.n] += 1

    def append(self, layers: Layers, valid: torch.Tensor) -> None:
        """Add prefilled rows (K/V per layer, `valid` [rows, width]) ending just before `end`."""
        g, width = valid.shape
        if width > self.end:  # make room on the left
            self._relayout(width - (self.end - self._live_from()))
        rows, new = slice(self.n, self.n + g), slice(self.end - width, self.end)
        pad = ~valid[:, None, :, None]
        for keys, values, (k, v) in zip(self.keys, self.values, layers, strict=True):
            # the rows' other columns may hold a finished row's tokens: zero them
            keys[rows, :, : new.start] = 0
            values[rows, :, : new.start] = 0
            keys[rows, :, new] = k.masked_fill(pad, 0)
            values[rows, :, new] = v.masked_fill(pad, 0)
        self.valid[rows] = False
        self.valid[rows, new] = valid
        self.first[rows] = new.start + valid.long().argmax(1)
        self.length[rows] = valid.sum(1)
        self.n += g

    def _live_from(self) -> int:
        """The first column any live row holds (`end` when there are none)."""
        return int(self.first[: self.n].min()) if self.n else self.end

    def _relayout(self, shift: int) -> None:
        """Move the live columns to start at `shift` in fresh buffers with GROWTH free ones."""
        live = self._live_from()
        width, span = self.end - live, slice(live, self.end)
        rows, heads, _, dim = self.shape
        cols = shift + width + GROWTH

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
        self.first[: self.n] += shift - live
        self.end = shift + width

    def remove(self, dead: list[int]) -> list[tuple[int, int]]:
        """Drop rows by moving the last live rows into their slots; returns (src, dst) moves."""
        dead_set = set(dead)
        n = self.n - len(dead)
        holes = sorted(d for d in dead if d < n)
        movers = [s for s in range(n, self.n) if s not in dead_set]
        moves = list(zip(movers, holes, strict=True))
        if moves:
            src, dst = torch.tensor(movers), torch.tensor(holes)
            for buf in (*self.keys, *self.values):
                buf[dst, :, : self.end] = buf[src, :, : self.end]
            self.valid[dst] = self.valid[src]
            self.first[dst] = self.first[src]
            self.length[dst] = self.length[src]
        self.n = n
        if not n:  # free the memory while idle
            self.keys, self.values = [], []
            self.valid = self.valid[:, :0]
            self.end = 0
        return moves
