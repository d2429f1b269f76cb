"""Stop conditions of a GEPA run besides the metric-call budget (which `Budget` enforces).

A nightly run needs more ways to end than "budget spent": a wall-clock deadline, a token or
money ceiling, a score that is good enough, a search that stopped improving, and an operator
who wants it to finish gracefully now. `StopRules.check` is a pure function of a
`RunProgress` snapshot (the caller measures time), so every rule is testable to its boundary.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

from gepa_opt.events import StopReason

RULE_ORDER = (
    StopReason.STOP_FILE,
    StopReason.SCORE_TARGET,
    StopReason.COST,
    StopReason.TOKENS,
    StopReason.WALL_TIME,
    StopReason.NO_IMPROVEMENT,
)
"""The order `StopRules.check` tests its rules: when several hold, the first is reported."""


@dataclass(frozen=True)
class TokenPricing:
    """Dollar prices per 1,000 tokens, for an engine whose LM reports tokens but no cost."""

    prompt_usd_per_1k: float
    completion_usd_per_1k: float

    def __post_init__(self) -> None:
        for name in ("prompt_usd_per_1k", "completion_usd_per_1k"):
            _check_non_negative(f"TokenPricing.{name}", getattr(self, name))

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.prompt_usd_per_1k + completion_tokens * self.completion_usd_per_1k
        ) / 1000


@dataclass(frozen=True)
class LMUsage:
    """Tokens (and money, if the caller prices them) the run's LMs have used so far.

    The engine never sees the adapter's LM calls, so the caller passes `optimize(usage=...)`
    a function returning this; `TokenPricing.cost_usd` turns tokens into dollars.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class RunProgress:
    """What the engine has accumulated so far: the only input the stop rules read."""

    elapsed_s: float
    """Seconds since the run started (the caller's clock, so tests need none)."""
    metric_calls_used: int = 0
    reflection_calls_used: int = 0
    prompt_tokens: int = 0
    """Over every LM call of the run (task and reflection LMs alike)."""
    completion_tokens: int = 0
    cost_usd: float = 0.0
    """Money spent so far: provider-reported, or `TokenPricing.cost_usd` of the tokens."""
    best_score: float | None = None
    """Best aggregate val score in the pool; None until the seed is scored."""
    proposals_since_improvement: int = 0
    """Proposals finished since `best_score` last rose (0 right after it rose)."""

    def __post_init__(self) -> None:
        counters = (
            "metric_calls_used",
            "reflection_calls_used",
            "prompt_tokens",
            "completion_tokens",
            "proposals_since_improvement",
        )
        for name in counters:
            _check_int(f"RunProgress.{name}", getattr(self, name), minimum=0)
        _check_non_negative("RunProgress.elapsed_s", self.elapsed_s)
        _check_non_negative("RunProgress.cost_usd", self.cost_usd)
        if self.best_score is not None:
            _check_finite("RunProgress.best_score", self.best_score)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class StopRules:
    """Optional limits, each None (off) by default; a limit stops the run once reached."""

    max_wall_s: float | None = None
    max_tokens: int | None = None
    """Prompt + completion tokens."""
    max_cost_usd: float | None = None
    score_target: float | None = None
    """Stop once the best aggregate val score is >= this."""
    max_proposals_without_improvement: int | None = None
    """K: stop after K finished proposals that did not raise the best score."""
    stop_file: Path | None = None
    """Stop once this path exists (a str is accepted and converted)."""

    def __post_init__(self) -> None:
        if self.max_wall_s is not None:
            _check_positive("StopRules.max_wall_s", self.max_wall_s)
        if self.max_tokens is not None:
            _check_int("StopRules.max_tokens", self.max_tokens, minimum=1)
        if self.max_cost_usd is not None:
            _check_positive("StopRules.max_cost_usd", self.max_cost_usd)
        if self.score_target is not None:
            _check_finite("StopRules.score_target", self.score_target)
        if self.max_proposals_without_improvement is not None:
            _check_int(
                "StopRules.max_proposals_without_improvement",
                self.max_proposals_without_improvement,
                minimum=1,
            )
        if self.stop_file is not None:
            if not isinstance(self.stop_file, str | os.PathLike) or not os.fspath(self.stop_file):
                raise ValueError(
                    f"StopRules.stop_file must be a non-empty path, got {self.stop_file!r}"
                )
            object.__setattr__(self, "stop_file", Path(self.stop_file))

    @property
    def enabled(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def check(self, progress: RunProgress) -> StopReason | None:
        """The first rule that holds, in `RULE_ORDER`, or None to go on."""
        if self.stop_file is not None and self.stop_file.exists():
            return StopReason.STOP_FILE
        if (
            self.score_target is not None
            and progress.best_score is not None
            and progress.best_score >= self.score_target
        ):
            return StopReason.SCORE_TARGET
        if self.max_cost_usd is not None and progress.cost_usd >= self.max_cost_usd:
            return StopReason.COST
        if self.max_tokens is not None and progress.total_tokens >= self.max_tokens:
            return StopReason.TOKENS
        if self.max_wall_s is not None and progress.elapsed_s >= self.max_wall_s:
            return StopReason.WALL_TIME
        if (
            self.max_proposals_without_improvement is not None
            and progress.proposals_since_improvement >= self.max_proposals_without_improvement
        ):
            return StopReason.NO_IMPROVEMENT
        return None


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _check_non_negative(name: str, value: object) -> None:
    if _check_finite(name, value) < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


def _check_positive(name: str, value: object) -> None:
    if _check_finite(name, value) <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
