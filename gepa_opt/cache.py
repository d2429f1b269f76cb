"""Evaluation cache: no (candidate, split, example) pair is ever paid for twice."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gepa_opt.types import ExampleId


class Split(StrEnum):
    """Part of the cache key: train and val may hold different examples under the same id."""

    TRAIN = "train"
    VAL = "val"


@dataclass(frozen=True)
class CachedEvaluation:
    output: Any
    score: float
    trajectory: Any
    objective_scores: dict[str, float] | None = None
    """Named objective -> score, when the adapter returned them."""


CacheKey = tuple[str, Split, ExampleId]
"""(sha256 of the candidate's content, split, example id)."""


class EvaluationCache:
    """Keyed by content, not pool index, so a re-proposed text costs nothing either."""

    def __init__(self) -> None:
        self._entries: dict[CacheKey, CachedEvaluation] = {}

    def get(self, digest: str, split: Split, example_id: ExampleId) -> CachedEvaluation | None:
        return self._entries.get((digest, split, example_id))

    def put(
        self, digest: str, split: Split, example_id: ExampleId, evaluation: CachedEvaluation
    ) -> None:
        self._entries[(digest, split, example_id)] = evaluation

    def items(self) -> list[tuple[CacheKey, CachedEvaluation]]:
        return list(self._entries.items())

    def __len__(self) -> int:
        return len(self._entries)
