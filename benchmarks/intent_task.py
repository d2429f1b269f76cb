"""The demo task for `gepa_vs_upstream`: the demo agent's two prompt components.

The agent (`infra/agents/intent_router.py`) with its two components (instructions,
example turns), on the requests of `infra/traces/demo_data/heldout.jsonl`, split by
`split_seed` into train / val / test (28 / 28 / 84 by default: 4 / 4 / 12 per intent). The
metric needs no judge, so both libraries see exactly the same one: 1.0 if the first intent
the reply names is the true intent, else 0.0, with feedback naming the right intent. The
local model is the agent, and the reflection LM unless `reflection_lm` names another (200
tokens, temperature 0.7, a fresh sampling seed per call drawn from the run's seed).

The paper's meta-prompt is used for the instructions (both libraries ship the same text and
record rendering). The example turns get their own template and records, given to both
libraries alike (`EXAMPLE_TURNS_TEMPLATE`): each record leads with the right turn as
`request => label`, and the template asks for the list of turns back.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import infra.traces
from flows.night.collect import load_heldout
from gepa_opt.meta_prompt import CURRENT_INSTRUCTIONS, EXAMPLES
from infra.agents.intent_router import LABELS, IntentRouter, parse_intent
from infra.lm import LM
from infra.settings import AgentOptSettings
from infra.types import Example

HELDOUT = Path(infra.traces.__file__).parent / "demo_data" / "heldout.jsonl"

# The example turns are a list, not an instruction: the paper's meta-prompt asks for "a new
# instruction", which a 135M reflection LM answers with prose that holds no turn at all.
# Both libraries get this template for that component, the paper's for the instructions.
EXAMPLE_TURNS_TEMPLATE = f"""I gave an assistant these example turns, one per line as `request => label`:
```
{CURRENT_INSTRUCTIONS}
```

These requests were answered wrongly or rightly; each shows its right example turn:
```
{EXAMPLES}
```

Write the new list of example turns, one per line as `request => label`: the turns you have, plus the right turns above.

Provide the new list within ``` blocks."""  # noqa: E501
COMPONENT_TEMPLATES = {"examples": EXAMPLE_TURNS_TEMPLATE}


@dataclass(frozen=True)
class Scored:
    """One rollout with its score and feedback: the trajectory both libraries reflect on."""

    example: Example
    output: str
    score: float
    feedback: str

    def record(self) -> dict[str, str]:
        """The paper's record: what the instructions are reflected on."""
        return {
            "Inputs": self.example.inputs["request"],
            "Generated Outputs": self.output,
            "Feedback": self.feedback,
        }

    def example_turn_record(self) -> dict[str, str]:
        """The same evidence for the example turns, led by the right turn in their own
        `request => label` format (the feedback already names the label)."""
        turn = f"{self.example.inputs['request']} => {LABELS[self.example.reference]}"
        return {
            "Right example turn": turn,
            "Assistant's reply": self.output,
            "Feedback": self.feedback,
        }


def reflective_dataset(trajectories: list[Scored], components: list[str]) -> dict[str, list]:
    return {
        component: [
            s.example_turn_record() if component == "examples" else s.record() for s in trajectories
        ]
        for component in components
    }


def judge_reply(example: Example, output: str) -> tuple[float, str]:
    """Exact match of the predicted intent, and feedback that names the right one."""
    want = LABELS[example.reference]
    got = parse_intent(output)
    if got == example.reference:
        return 1.0, f"Correct: this is a '{want}' request."
    named = f"named '{LABELS[got]}'" if got else "named no label"
    return 0.0, (
        f"Wrong: the reply {named}; the right label is '{want}'. The reply must name "
        f"exactly one of: {', '.join(LABELS.values())}."
    )


def split_requests(
    n_train: int, n_val: int, split_seed: int
) -> tuple[list[Example], list[Example], list[Example]]:
    """The labelled demo requests, shuffled once by a fixed seed within each intent and
    dealt one intent at a time, then cut in three: every split holds the intents alike
    (a plain shuffle left val with no playlist request and 8 of 30 searches)."""
    rng = random.Random(split_seed)
    by_intent: dict[str, list[Example]] = {}
    for example in sorted(load_heldout(HELDOUT), key=lambda e: e.id):
        by_intent.setdefault(example.reference, []).append(example)
    for group in by_intent.values():
        rng.shuffle(group)
    groups = [by_intent[intent] for intent in sorted(by_intent)]
    examples = [
        group[i] for i in range(max(map(len, groups))) for group in groups if i < len(group)
    ]
    train, val = examples[:n_train], examples[n_train : n_train + n_val]
    test = examples[n_train + n_val :]
    if not test:
        raise SystemExit(f"{len(examples)} examples leave no test split after {n_train}+{n_val}")
    return train, val, test


@dataclass
class IntentTask:
    """The `gepa_vs_upstream` task interface over the demo agent and the local model."""

    lm: LM
    reflection_lm: LM | None = None
    """The model that writes proposals; None: the agent's own `lm`."""
    n_train: int = 28
    n_val: int = 28
    split_seed: int = 0
    settings: AgentOptSettings = field(default_factory=AgentOptSettings)
    name: str = "demo"
    templates: dict[str, str] = field(default_factory=lambda: dict(COMPONENT_TEMPLATES))

    def __post_init__(self) -> None:
        self.train, self.val, self.test = split_requests(self.n_train, self.n_val, self.split_seed)
        self.agent = IntentRouter()
        self.seed_prompts = self.agent.seed_prompts()

    @staticmethod
    def example_id(example: Example) -> str:
        return example.id

    async def rollout(self, example: Example, candidate: dict[str, str]) -> Scored:
        run = await self.agent.run(
            example, candidate, self.lm, max_tokens=self.settings.max_tokens, temperature=0.0
        )
        return Scored(example, run.output, *judge_reply(example, run.output))

    reflective_dataset = staticmethod(reflective_dataset)

    def reflector(self, seed: int) -> Callable[[str], Awaitable[str]]:
        """A fresh sampling seed per call: N children of one parent must not all coincide."""
        calls = 0

        async def reflect(prompt: str) -> str:
            nonlocal calls
            calls += 1
            completion = await (self.reflection_lm or self.lm).complete(
                [{"role": "user", "content": prompt}],
                max_tokens=self.settings.reflection_max_tokens,
                temperature=0.7,
                seed=seed * 1_000_003 + calls,
            )
            return completion.text

        return reflect
