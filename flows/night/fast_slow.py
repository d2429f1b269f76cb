"""The night's fast-slow schedule, as decisions: which steps run, what budget each gets,
and whether a step is kept. Pure functions of settings and scores; `flows.nightly` runs
the steps.

A step starts from the best state so far (prompts, and the adapter they run with) and is
kept only if it beats that state by `fast_slow.min_step_gain` on the selection slice of
the held-out examples, and by more than the noise: the paired 95% interval of its gain
over that state's scores must lie above zero (a +0.043 on 70 examples is 3 of them, and
kept a reflector's nonsense instruction once); otherwise the night goes on from the best
state. Steps are chosen
on one slice and the promotion gate reads the other, so the gate's interval is not
inflated by the choice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from statistics import fmean
from typing import Literal

from flows.night.stages import Evaluation, PromptStage
from infra.settings import AgentOptSettings, LoraSettings
from infra.types import Example
from judges.metrics import Estimate, bootstrap
from weights.round import LoraRound, ServedAdapter

Kind = Literal["p", "w"]
KIND_NAMES = {"p": "prompts (GEPA)", "w": "weights (LoRA)"}


@dataclass(frozen=True)
class NightState:
    """What a step starts from and what a kept step leaves: prompts and the adapter they
    run with (None: the base model); `step` is the step that made it (0: production)."""

    prompts: dict[str, str]
    adapter: ServedAdapter | None
    step: int = 0


@dataclass(frozen=True)
class StepDecision:
    kept: bool
    before: float | None  # the best state's score (None: a step not run, nothing scored)
    after: float | None  # the step's, None when it produced nothing to score
    on: str  # what the scores were measured on
    reason: str  # one sentence


@dataclass
class Step:
    """One step of the schedule, as it ran."""

    index: int  # 1-based
    kind: Kind
    started_from: int  # the step whose state it started from (0: production)
    decision: StepDecision
    seconds: float
    prompts: dict[str, str] = field(default_factory=dict)  # the prompts it started from
    fst: bool = False  # a weight step whose rollouts drew prompts from the Pareto front
    prompt: PromptStage | None = None  # a prompt step's GEPA run
    lora: LoraRound | None = None  # a weight step's round
    selection: Evaluation | None = None  # its state on the selection slice

    def line(self) -> str:
        return f"step {self.index} ({KIND_NAMES[self.kind]}, from step {self.started_from}): " + (
            self.decision.reason
        )


def share(total: int, parts: int, k: int) -> int:
    """Part `k` (0-based) of `total` split evenly into `parts`, the first parts taking
    the remainder."""
    return total // parts + (k < total % parts)


def prompt_budget(cfg: AgentOptSettings, steps: tuple[Kind, ...], k: int) -> AgentOptSettings:
    """The agent_opt settings of the `k`-th prompt step (0-based): the night's metric and
    reflection calls split evenly across its prompt steps."""
    n = steps.count("p")
    update = {"max_metric_calls": share(cfg.max_metric_calls, n, k)}
    if cfg.max_reflection_calls is not None:
        update["max_reflection_calls"] = max(1, share(cfg.max_reflection_calls, n, k))
    return cfg.model_copy(update=update)


def weight_budget(cfg: LoraSettings, steps: tuple[Kind, ...], k: int) -> LoraSettings:
    """The lora settings of the `k`-th weight step: `lora.max_steps` split evenly."""
    if cfg.max_steps is None:
        return cfg
    return cfg.model_copy(update={"max_steps": max(1, share(cfg.max_steps, steps.count("w"), k))})


def split_heldout(
    examples: list[Example], selection_share: float, seed: int
) -> tuple[list[Example], list[Example]]:
    """(selection, gate): a seeded share of the held-out examples chooses between steps,
    the rest decides promotion. Depends only on the ids and the seed."""
    shuffled = sorted(examples, key=lambda e: e.id)
    random.Random(f"heldout-selection:{seed}").shuffle(shuffled)
    cut = round(len(shuffled) * selection_share) if len(shuffled) > 1 else 0
    return shuffled[:cut], shuffled[cut:]


def selection_score(evaluation: Evaluation) -> float | None:
    """Mean per-example score: true labels where known, else the judge's."""
    return fmean(evaluation.scores.values()) if evaluation.scores else None


def paired_gain(before: Evaluation, after: Evaluation, seed: int = 0) -> Estimate | None:
    """The step's mean gain over the best state on the examples both were scored on,
    with its paired bootstrap 95% interval; None when they share none."""
    ids = sorted(set(before.scores) & set(after.scores))
    if not ids:
        return None
    new, old = [after.scores[i] for i in ids], [before.scores[i] for i in ids]
    return bootstrap(lambda a, b: fmean(a) - fmean(b), new, old, resamples=2000, seed=seed)


def measured_on(evaluation: Evaluation | None) -> str:
    if evaluation is None:
        return "the Pareto set (judge; no held-out selection slice)"
    labels = "true labels" if evaluation.by_labels else "the judge"
    return f"the held-out selection slice ({evaluation.n} examples, {labels})"


def decide_step(
    before: float,
    after: float | None,
    on: str,
    min_gain: float,
    best_step: int,
    why_none: str,
    gain: Estimate | None = None,
) -> StepDecision:
    """Keep a step only if it beats the best state by more than `min_gain` and, where its
    paired `gain` over that state is known, by more than the noise (the interval's low end
    above zero)."""
    if after is None:
        reason = f"dropped: {why_none}; the night goes on from step {best_step}"
        return StepDecision(False, before, None, on, reason)
    measured = f"{after:.3f} against {before:.3f} on {on}"
    if gain is not None and gain.low is not None:
        measured += f", paired gain {gain.value:+.3f} [{gain.low:.3f}, {gain.high:.3f}]"
    inside_noise = gain is not None and (gain.low is None or gain.low <= 0)
    if after > before + min_gain and not inside_noise:
        return StepDecision(True, before, after, on, f"kept: {measured}")
    if after > before + min_gain:
        reason = (
            f"dropped: {measured}, a gain inside the noise (its interval does not exclude "
            f"zero); the night goes on from step {best_step}"
        )
        return StepDecision(False, before, after, on, reason)
    gain = f" + fast_slow.min_step_gain {min_gain}" if min_gain else ""
    reason = (
        f"dropped: {measured}, not above {before:.3f}{gain}; the night goes on from step "
        f"{best_step}"
    )
    return StepDecision(False, before, after, on, reason)
