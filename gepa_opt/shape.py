"""Batched proposals (batched-GEPA): P parents x N children, e.g. "2x2" or "1x2".

The engine has no steps to wait on, so the shape says how proposals are grouped: P
sibling groups in flight, each one parent drawn from the pool when the group starts and
one minibatch its N children share (the parent is paid for once per minibatch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ProposalShape:
    parents: int
    """P: parents drawn together, each with one minibatch its children share."""
    children: int
    """N: children reflected from each parent on that minibatch."""

    def __post_init__(self) -> None:
        for name in ("parents", "children"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ProposalShape.{name} must be an integer >= 1, got {value!r}")

    @property
    def width(self) -> int:
        """Proposals of the shape's groups together."""
        return self.parents * self.children

    @classmethod
    def parse(cls, text: str) -> ProposalShape:
        match = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", text)
        if not match or min(int(match[1]), int(match[2])) < 1:
            raise ValueError(f'a proposal shape is "PxN" with P, N >= 1 (e.g. "2x2"), got {text!r}')
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.parents}x{self.children}"
