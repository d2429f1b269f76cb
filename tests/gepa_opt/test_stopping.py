"""Stop rules: each fires exactly at its limit, None turns it off, and the order is fixed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gepa_opt.events import StopReason
from gepa_opt.stopping import RULE_ORDER, RunProgress, StopRules, TokenPricing

CALM = RunProgress(elapsed_s=0.0, best_score=0.5)


def progress(**changes: Any) -> RunProgress:
    return replace(CALM, **changes)


@pytest.mark.parametrize(
    ("rules", "below", "at", "reason"),
    [
        (
            StopRules(max_wall_s=60.0),
            progress(elapsed_s=59.999),
            progress(elapsed_s=60.0),
            StopReason.WALL_TIME,
        ),
        (
            StopRules(max_tokens=1000),
            progress(prompt_tokens=700, completion_tokens=299),
            progress(prompt_tokens=700, completion_tokens=300),
            StopReason.TOKENS,
        ),
        (
            StopRules(max_cost_usd=2.5),
            progress(cost_usd=2.4999),
            progress(cost_usd=2.5),
            StopReason.COST,
        ),
        (
            StopRules(score_target=0.8),
            progress(best_score=0.7999),
            progress(best_score=0.8),
            StopReason.SCORE_TARGET,
        ),
        (
            StopRules(max_proposals_without_improvement=5),
            progress(proposals_since_improvement=4),
            progress(proposals_since_improvement=5),
            StopReason.NO_IMPROVEMENT,
        ),
    ],
)
def test_each_rule_fires_at_its_limit_and_not_before(
    rules: StopRules, below: RunProgress, at: RunProgress, reason: StopReason
) -> None:
    assert rules.check(below) is None
    assert rules.check(at) == reason
    assert rules.check(at) == reason.value  # a plain, stable string for logs and results


def test_stop_file_fires_once_the_path_exists(tmp_path: Path) -> None:
    stop = tmp_path / "STOP"
    rules = StopRules(stop_file=str(stop))
    assert rules.stop_file == stop
    assert rules.check(CALM) is None
    stop.touch()
    assert rules.check(CALM) == "stop_file"


def test_a_missing_best_score_never_meets_the_target() -> None:
    assert StopRules(score_target=-1.0).check(progress(best_score=None)) is None


def test_no_rules_never_stop() -> None:
    rules = StopRules()
    assert not rules.enabled
    extreme = RunProgress(
        elapsed_s=1e9,
        metric_calls_used=10**9,
        prompt_tokens=10**12,
        completion_tokens=10**12,
        cost_usd=1e9,
        best_score=1.0,
        proposals_since_improvement=10**6,
    )
    assert rules.check(extreme) is None
    assert StopRules(max_tokens=1).enabled


def test_precedence_when_every_rule_holds(tmp_path: Path) -> None:
    stop = tmp_path / "STOP"
    stop.touch()
    every = RunProgress(
        elapsed_s=10.0,
        prompt_tokens=10,
        completion_tokens=10,
        cost_usd=1.0,
        best_score=1.0,
        proposals_since_improvement=3,
    )
    rules = StopRules(
        max_wall_s=1.0,
        max_tokens=1,
        max_cost_usd=0.5,
        score_target=0.9,
        max_proposals_without_improvement=1,
        stop_file=stop,
    )
    order = []
    while (reason := rules.check(every)) is not None:
        order.append(reason)
        off = {
            StopReason.STOP_FILE: "stop_file",
            StopReason.SCORE_TARGET: "score_target",
            StopReason.COST: "max_cost_usd",
            StopReason.TOKENS: "max_tokens",
            StopReason.WALL_TIME: "max_wall_s",
            StopReason.NO_IMPROVEMENT: "max_proposals_without_improvement",
        }[reason]
        rules = replace(rules, **{off: None})
    assert order == list(RULE_ORDER)
    assert [str(r) for r in order] == [
        "stop_file",
        "score_target",
        "cost",
        "tokens",
        "wall_time",
        "no_improvement",
    ]


def test_token_pricing_turns_tokens_into_dollars() -> None:
    pricing = TokenPricing(prompt_usd_per_1k=0.5, completion_usd_per_1k=1.5)
    assert pricing.cost_usd(prompt_tokens=2000, completion_tokens=1000) == pytest.approx(2.5)
    spent = progress(cost_usd=pricing.cost_usd(2000, 1000))
    assert StopRules(max_cost_usd=2.5).check(spent) == "cost"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_wall_s": 0}, "StopRules.max_wall_s"),
        ({"max_wall_s": -1.0}, "StopRules.max_wall_s"),
        ({"max_wall_s": float("inf")}, "StopRules.max_wall_s"),
        ({"max_tokens": 0}, "StopRules.max_tokens"),
        ({"max_tokens": 10.0}, "StopRules.max_tokens"),
        ({"max_tokens": True}, "StopRules.max_tokens"),
        ({"max_cost_usd": 0.0}, "StopRules.max_cost_usd"),
        ({"max_cost_usd": float("nan")}, "StopRules.max_cost_usd"),
        ({"score_target": float("nan")}, "StopRules.score_target"),
        ({"score_target": "0.9"}, "StopRules.score_target"),
        ({"max_proposals_without_improvement": 0}, "StopRules.max_proposals_without_improvement"),
        ({"stop_file": ""}, "StopRules.stop_file"),
        ({"stop_file": 3}, "StopRules.stop_file"),
    ],
)
def test_invalid_rules_name_their_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        StopRules(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"elapsed_s": -0.1}, "RunProgress.elapsed_s"),
        ({"prompt_tokens": -1}, "RunProgress.prompt_tokens"),
        ({"completion_tokens": 1.5}, "RunProgress.completion_tokens"),
        ({"cost_usd": -0.01}, "RunProgress.cost_usd"),
        ({"best_score": float("nan")}, "RunProgress.best_score"),
        ({"proposals_since_improvement": -1}, "RunProgress.proposals_since_improvement"),
        ({"metric_calls_used": -1}, "RunProgress.metric_calls_used"),
    ],
)
def test_invalid_progress_names_its_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        progress(**kwargs)


def test_invalid_pricing_names_its_field() -> None:
    with pytest.raises(ValueError, match="TokenPricing.completion_usd_per_1k"):
        TokenPricing(prompt_usd_per_1k=0.1, completion_usd_per_1k=-0.1)


def test_rules_and_progress_are_frozen() -> None:
    with pytest.raises(AttributeError):
        StopRules().max_tokens = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        CALM.elapsed_s = 1.0  # type: ignore[misc]
