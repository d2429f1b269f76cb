"""A checkpoint's weights read from its safetensors file(s), one tensor at a time.

The engine packs the Linear weights into copies of its own, so the transformers model's
would be a second copy of the body (3 GB for a 1.5B model in bf16): the engine reads them
here instead, each through a file mapping of its own that is gone once the weight is
packed, and releases the model's. An adapter's base weights come from here too. Each
tensor comes back as from_pretrained loads it: the file's values in the model's dtype.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

SINGLE_FILE = "model.safetensors"
INDEX = "model.safetensors.index.json"  # a sharded checkpoint's tensor -> file map


class CheckpointWeights:
    """`get(name)`: the tensor `name` ("model.layers.0.mlp.up_proj.weight") in `dtype`."""

    def __init__(self, files: dict[str, Path], dtype: torch.dtype):
        self.files, self.dtype = files, dtype

    @classmethod
    def of(cls, folder: str | Path, dtype: torch.dtype) -> CheckpointWeights | None:
        """The folder's safetensors weights; None for a checkpoint without them (an old
        pytorch_model.bin cannot be read per tensor, so its model keeps its weights)."""
        folder = Path(folder)
        if (folder / INDEX).exists():
            weight_map = json.loads((folder / INDEX).read_text())["weight_map"]
            return cls({name: folder / file for name, file in weight_map.items()}, dtype)
        if (folder / SINGLE_FILE).exists():
            with safe_open(folder / SINGLE_FILE, framework="pt") as f:
                return cls({name: folder / SINGLE_FILE for name in f.keys()}, dtype)
        return None

    def __contains__(self, name: str) -> bool:
        return name in self.files

    def get(self, name: str) -> torch.Tensor:
        """A view of a mapping of the file that lasts as long as the tensor: for reading
        into a copy (a weight kept as a view would keep a mapping of the whole file)."""
        with safe_open(self.files[name], framework="pt") as f:
            return f.get_tensor(name).to(self.dtype)
