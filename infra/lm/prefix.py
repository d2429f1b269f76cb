"""Prefix sharing: the KV of a prompt prefix that many requests share is computed once.

In flywheel concurrent requests nearly always share a long prefix (an agent's system
prompt and few-shot turns, a judge's rubric). RoPE is applied with the position ids, not
the column, so a prefix's KV computed at positions 0..P-1 serves any row whose own
position ids for those tokens are 0..P-1; the rest of each prompt is then prefilled on
top of it, with padding between prefix and suffix masked out.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values) [1, h, P, d]


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def group_by_prefix(prompts: list[list[int]], min_shared: int) -> list[tuple[list[int], int]]:
    """Indices of prompts that share at least `min_shared` tokens, with their shared length.

    Sorted prompts put the longest shared prefixes next to each other. The shared length
    leaves every prompt at least one token of its own: its logits are the first output.
    """
    groups: list[tuple[list[int], int]] = []
    for i in sorted(range(len(prompts)), key=lambda i: prompts[i]):
        if groups:
            members, shared = groups[-1]
            n = common_prefix_len(prompts[members[0]][:shared], prompts[i])
            if n >= min_shared:
                groups[-1] = (members + [i], n)
                continue
        groups.append(([i], len(prompts[i])))
    return [(m, min(s, min(len(prompts[i]) for i in m) - 1)) for m, s in groups]


class PrefixCache:
    """The KV of recently shared prefixes, per adapter, least recently used dropped first.

    A cached prefix also serves any shorter match: the KV of token j depends only on tokens
    0..j, so the first k columns of a cached entry are the KV of its first k tokens.
    """

    def __init__(self, capacity_tokens: int = 4096, min_shared: int = 16):
        self.capacity, self.min_shared = capacity_tokens, min_shared
        self._entries: OrderedDict[tuple[Any, tuple[int, ...]], Layers] = OrderedDict()

    def clear(self) -> None:
        self._entries.clear()

    def match(self, ids: list[int], adapter: Any) -> tuple[int, Layers | None]:
        """The longest cached prefix of `ids` (if at least min_shared), and its KV."""
        best, found = 0, None
        for key in self._entries:
            n = common_prefix_len(key[1], ids) if key[0] == adapter else 0
            if n > best:
                best, found = n, key
        if best < self.min_shared:
            return 0, None
        self._entries.move_to_end(found)
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in self._entries[found]]

    def kv(self, model: PreTrainedModel, ids: list[int], adapter: Any) -> Layers:
        """The KV of `ids`, extending the longest cached match; cached for later groups."""
        known, past = self.match(ids, adapter)
        if known == len(ids):
            return past
        cache = DynamicCache(config=model.config)
        for layer, (k, v) in enumerate(past or []):
            cache.update(k, v, layer)
        model(
            input_ids=torch.tensor([ids[known:]]),
            position_ids=torch.arange(known, len(ids))[None],
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        layers = cache_layers(cache)
        self._entries[(adapter, tuple(ids))] = layers
        while sum(len(key[1]) for key in self._entries) > self.capacity and len(self._entries) > 1:
            self._entries.popitem(last=False)
        return layers


def cache_layers(cache: DynamicCache) -> Layers:
    return [(layer.keys, layer.values) for layer in cache.layers]


def forward_suffixes(
    model: Any, suffixes: list[list[int]], prefix: Layers | None, pad_id: int, **kwargs: Any
) -> tuple[Any, Layers, torch.Tensor]:
    """One forward over left-padded `suffixes`, each after the same prefix KV (or none).

    Returns the model output, the K/V per layer (prefix, then padded suffixes) and the
    validity mask of its columns [rows, prefix + width].
    """
    g, width = len(suffixes), max(map(len, suffixes))
    shared = prefix[0][0].shape[2] if prefix else 0
    ids = torch.tensor([[pad_id] * (width - len(s)) + s for s in suffixes])
    own = torch.arange(width)[None, :] >= torch.tensor([width - len(s) for s in suffixes])[:, None]
    mask = torch.cat([torch.ones(g, shared, dtype=torch.bool), own], 1)
    cache = DynamicCache(config=model.config)
    for layer, (k, v) in enumerate(prefix or []):
        cache.update(k.expand(g, -1, -1, -1), v.expand(g, -1, -1, -1), layer)
    out = model(
        input_ids=ids,
        attention_mask=mask.long(),
        position_ids=shared + (own.long().cumsum(-1) - 1).clamp(min=0),
        cache=cache,
        use_cache=True,
        **kwargs,
    )
    return out, cache_layers(cache), mask
