"""Prefix sharing: the KV of a prompt prefix that many requests share is computed once.

In flywheel concurrent requests nearly always share a long prefix (an agent's system
prompt and few-shot turns, a judge's rubric). RoPE is applied with the position ids, so a
prefix's KV at positions 0..P-1 serves any prompt that starts with it; the rest of the
prompt is prefilled on top. Shared lengths are whole CHUNKs: a prompt's attention runs in
chunks at fixed positions (`attention`), so the KV of a whole-chunk prefix is the one the
prompt would compute itself, bit for bit, and sharing never changes a request's numbers.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from infra.lm.engine.attention import CHUNK
from infra.lm.engine.kv_slab import Layers


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def shareable(shared: int, length: int, keep: int = 1) -> int:
    """The longest whole-chunk prefix of `shared` tokens that leaves a prompt of `length`
    its last `keep` tokens to prefill (a generation needs its last token's logits)."""
    return max(min(shared, length - keep), 0) // CHUNK * CHUNK


def group_by_prefix(
    prompts: list[list[int]], min_shared: int, keep: list[int]
) -> list[tuple[list[int], int]]:
    """Indices of prompts that share at least `min_shared` tokens, with the shareable length
    (which leaves prompt i its last `keep[i]` tokens).

    Sorted prompts put the longest shared prefixes next to each other.
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
    return [(m, min(shareable(s, len(prompts[i]), keep[i]) for i in m)) for m, s in groups]


class PrefixCache:
    """The KV of recently shared prefixes, per adapter, least recently used dropped first.

    A cached prefix also serves any shorter whole-chunk match: the KV of token j depends
    only on tokens 0..j, so the first k columns of a cached entry are the KV of its first k
    tokens.
    """

    def __init__(self, capacity_tokens: int = 4096):
        self.capacity = capacity_tokens
        self._entries: OrderedDict[tuple[Any, tuple[int, ...]], Layers] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def match(self, ids: list[int], adapter: Any, keep: int = 1) -> tuple[int, Layers | None]:
        """The longest cached whole-chunk prefix of `ids` that leaves it its last `keep`
        tokens, and its KV."""
        best, found = 0, None
        for key in self._entries:
            if key[0] == adapter:
                n = shareable(common_prefix_len(key[1], ids), len(ids), keep)
                if n > best:
                    best, found = n, key
        if not best:
            return 0, None
        self._entries.move_to_end(found)
        return best, [(k[:, :best], v[:, :best]) for k, v in self._entries[found]]

    def put(self, ids: list[int], adapter: Any, layers: Layers) -> None:
        self._entries[(adapter, tuple(ids))] = layers
        while sum(len(key[1]) for key in self._entries) > self.capacity and len(self._entries) > 1:
            self._entries.popitem(last=False)
