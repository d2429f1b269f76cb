"""A component that holds few-shot demonstrations drawn from a pool, changed by evidence.

Reflection rewrites a component through an LM, which a small one does badly (a 1.5B
reflector returned the router's seed instruction unchanged in 9 of 10 tries), while a
handful of labelled requests shown as demonstrations lifted the demo router's accuracy on
unseen requests from 0.27 to 0.49 with no training at all. So a component declared here
is not reflected on: when its turn comes, the parent's minibatch says which examples it
failed, and the pool's demonstrations most like them go in (`demo_proposal.py`), within
a token budget. Everything else (acceptance on the minibatch, the valset pass, the
Pareto pool, merge) treats it as any other component's text.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def chars_over_four(text: str) -> int:
    """A tokenizer-free estimate of a text's tokens: about four characters each in English.
    Pass the model's own count where the budget must be exact."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class Demo:
    """One demonstration the component may show."""

    request: str
    """The input it answers: what its resemblance to a failing example is measured on.
    Written as `Demonstrations.request_of` writes a training example's, or the two would
    not be compared like with like."""

    text: str
    """The line written into the component (one line: the component's demonstrations are
    its lines, and it is read back line by line)."""

    def __post_init__(self) -> None:
        if not self.request.strip():
            raise ValueError(f"Demo.request is blank (text {self.text!r})")
        if not self.text.strip() or "\n" in self.text or "\r" in self.text:
            raise ValueError(f"Demo.text must be one non-blank line, got {self.text!r}")


@dataclass(frozen=True)
class Demonstrations:
    """Which component holds demonstrations, the pool they come from, and their budget.
    Passed to `optimize(..., demonstrations=...)`."""

    component: str
    """The seed component whose text is the demonstrations, one per line. Its lines that
    the pool does not hold (the seed's own) are kept, dropped or swapped like the others,
    their resemblance measured on the line itself."""

    pool: tuple[Demo, ...]
    """What may be shown: one per labelled training example, its request and the reply it
    should have had, written as the agent writes a demonstration. It must hold no valset
    example's reply, or the valset pass measures recall instead of what the prompt
    teaches. A demonstration of a request in the parent's minibatch is never the one
    added: the minibatch test would then score the answer just written in. The adapter's
    `refuses` still applies to the component's text, so leave out lines it would refuse.
    Not saved with the run: a resumed run draws from the pool it is given, and takes the
    texts drawn before the stop from its journal."""

    max_tokens: int = 256
    """The component's budget, by `count_tokens`: every proposal fits it, dropping the
    least useful demonstrations when an addition would not. The seed's text is not
    trimmed until its first proposal. The demo router's `request => label` lines take
    about 15 each: two per kind (what lifted its accuracy to 0.49) take about 225."""

    count_tokens: Callable[[str], int] = chars_over_four
    """A text's length in the agent model's tokens (the default estimates it)."""

    request_of: Callable[[Any], str] = str
    """A training example's request, written as `Demo.request` is: what resemblance to
    the pool is measured on (TF-IDF cosine)."""

    per_failure: int = 1
    """Demonstrations added per failing minibatch example, its most similar first: more
    shows each failure more ways, and fills the budget faster."""

    passes: Callable[[float], bool] | None = None
    """Whether a minibatch score is a pass. A failure gets demonstrations added, and the
    shown ones resembling it count against themselves; those resembling a pass count for
    themselves. None: a score at `GEPAConfig.perfect_score` passes, for a metric that is
    1 or 0; for a judge's probability, pass the judge's own cut, or every reply short of
    certain counts as failed."""

    def __post_init__(self) -> None:
        if not isinstance(self.component, str) or not self.component:
            raise ValueError(
                f"Demonstrations.component must name a component, got {self.component!r}"
            )
        if not self.pool:
            raise ValueError(
                "Demonstrations.pool is empty: with nothing to draw from, pass no "
                "Demonstrations and leave the component as it is"
            )
        for position, demo in enumerate(self.pool):
            if not isinstance(demo, Demo):
                raise ValueError(
                    f"Demonstrations.pool[{position}] must be a Demo, got {type(demo).__name__}"
                )
        for name in ("max_tokens", "per_failure"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Demonstrations.{name} must be a positive integer, got {value!r}")
