"""The decode engine's KV cache: preallocated per-layer buffers, one row per request.

A DynamicCache would `torch.cat` the whole cache on every step (at 32 rows x 300 tokens
that copy is as large as the weights read per step); the slab writes one column in place.
Each row holds its tokens at columns 0..length-1 (left-aligned, whatever its neighbours)
and zeros after them, so a row's attention sums see the same values in the same lanes
however wide the slab is (see `attention`).
"""

from __future__ import annotations

import torch

from infra.lm.engine.attention import BLOCK

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values) [kv_heads, n, dim]


class KVSlab:
    """K/V buffers [rows, kv_heads, cols, head_dim] for every layer; rows 0..n-1 are live.

    `cols` is the smallest multiple of BLOCK that holds every live row plus the column
    the next step writes, so a step reads no more than it needs: the buffers grow when a
    row reaches the edge and shrink when the longest row leaves.
    """

    def __init__(self, n_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, rows: int):
        self.shape = (rows, kv_heads, 0, head_dim)
        self.n_layers, self.dtype = n_layers, dtype
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.lengths = torch.zeros(rows, dtype=torch.long)  # tokens each row holds
        self.n = 0

    @property
    def cols(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0

    def add(self, layers: Layers) -> None:
        """A prefilled row: its K/V per layer, [kv_heads, length, dim]."""
        length = layers[0][0].shape[1]
        if length > self.cols:
            self._resize(length)
        row = self.n
        for keys, values, (k, v) in zip(self.keys, self.values, layers, strict=True):
            keys[row, :, :length] = k
            values[row, :, :length] = v
            keys[row, :, length:] = 0  # a finished row may have left its tokens here
            values[row, :, length:] = 0
        self.lengths[row] = length
        self.n += 1

    def step_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Position ids [n, 1] of the next step, and its additive mask [n, 1, 1, cols]."""
        n, lengths = self.n, self.lengths[: self.n]
        self._resize(int(lengths.max()) + 1)
        hidden = torch.arange(self.cols) > lengths[:, None]  # the step's own column is seen
        bias = torch.zeros(n, self.cols).masked_fill_(hidden, float("-inf"))
        return lengths[:, None].clone(), bias[:, None, None]

    def write(self, layer: int, key: torch.Tensor, value: torch.Tensor):
        """The step's K/V [n, kv_heads, dim] at each row's next column; returns the layer's
        live keys and values [n, kv_heads, cols, dim]."""
        n = self.n
        rows, cols = torch.arange(n), self.lengths[:n]
        self.keys[layer][rows, :, cols] = key
        self.values[layer][rows, :, cols] = value
        return self.keys[layer][:n], self.values[layer][:n]

    def advance(self) -> None:
        self.lengths[: self.n] += 1

    def _resize(self, needed: int) -> None:
        """Make `cols` the smallest multiple of BLOCK >= needed (grow or shrink)."""
        cols = -(-needed // BLOCK) * BLOCK
        if cols == self.cols:
            return
        rows, heads, _, dim = self.shape
        keep = min(cols, self.cols)

        def moved(old: torch.Tensor | None) -> torch.Tensor:
            new = torch.zeros(rows, heads, cols, dim, dtype=self.dtype)
            if old is not None:
                new[: self.n, :, :keep] = old[: self.n, :, :keep]
            return new

        self.keys = [moved(k) for k in self.keys or [None] * self.n_layers]
        self.values = [moved(v) for v in self.values or [None] * self.n_layers]

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
                buf[dst] = buf[src]
            self.lengths[dst] = self.lengths[src]
        self.n = n
        if not n:  # free the memory while idle
            self.keys, self.values = [], []
        return moves
