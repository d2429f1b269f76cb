"""A search that needs depth: rule ladders, discovered one generation at a time.

The hidden answer key is four ladders (topics) of eight rules each, `topic-k: secret`. An
example asks a question of one topic at one level j; a prompt answers it fully only if it
states rules 1..j of that topic with the right secrets, and gets min(p, j)/j for a correct
prefix of p rules. Feedback on an imperfect answer names the first missing rule of that
topic and reveals its secret, so a reflection can add one rung per accepted generation:
the seed scores 0, and val climbs over up to 32 accepted generations in one lineage (fewer
only where a merge joins lineages that climbed different topics).

The reflection model is scripted and deterministic, with no LM: it reads the current
instructions and the first imperfect record of the meta-prompt and writes the rung it
names, right with probability `P_RIGHT`, else with a wrong secret (no gain, so rejected on
the minibatch); with probability `P_DROP` it also loses one rule it had (an accepted child
that is worse elsewhere, which only the valset shows). Its random draws are seeded by
(run seed, prompt, how many times this run sent that same prompt), so siblings reflecting
on the same evidence differ, and an engine's result does not depend on call timing.
Siblings mostly propose the same rung: breadth from one parent buys little here, while
depth buys everything, which is the case a batched engine must not get wrong.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gepa_opt.meta_prompt import CURRENT_INSTRUCTIONS, EXAMPLES

TOPICS = ("amber", "basalt", "cobalt", "dune")
LEVELS = 8
P_RIGHT = 0.5
P_DROP = 0.15
SEED_PROMPT = "Answer each question by the house rules below."

TEMPLATE = f"""The assistant follows these instructions:
```
{CURRENT_INSTRUCTIONS}
```

Questions it answered, with feedback:
```
{EXAMPLES}
```

Write the new instructions within ``` blocks."""

_RULE = re.compile(r"^(\w+)-(\d+): (\w+)$", re.MULTILINE)
_MISSING = re.compile(r"rule (\w+)-(\d+) is missing; its secret is '(\w+)'")


def secret(topic: str, level: int) -> str:
    return hashlib.sha256(f"{topic}-{level}".encode()).hexdigest()[:6]


@dataclass(frozen=True)
class Question:
    id: str
    topic: str
    level: int


def questions(split: str, n: int, split_seed: int) -> list[Question]:
    """n questions of random topic and level: splits differ, so test is not val again."""
    rng = random.Random(f"depth:{split}:{split_seed}")
    return [Question(f"{split}-{i}", rng.choice(TOPICS), rng.randint(1, LEVELS)) for i in range(n)]


def prefix(prompt: str, topic: str) -> int:
    """Rungs 1..p of `topic` stated with the right secret (a rung stated twice with
    different secrets counts as wrong)."""
    stated: dict[int, set[str]] = {}
    for t, level, word in _RULE.findall(prompt):
        if t == topic:
            stated.setdefault(int(level), set()).add(word)
    p = 0
    while stated.get(p + 1) == {secret(topic, p + 1)}:
        p += 1
    return p


def answer(question: Question, prompt: str) -> tuple[str, float, str]:
    """(output, score, feedback) of a prompt on one question."""
    p = prefix(prompt, question.topic)
    score = min(p, question.level) / question.level
    output = f"{question.topic} level {question.level}: {min(p, question.level)} rules applied"
    if score >= 1.0:
        return output, 1.0, "Correct."
    missing = p + 1
    return (
        output,
        score,
        f"Incomplete: rule {question.topic}-{missing} is missing; its secret is "
        f"'{secret(question.topic, missing)}'.",
    )


class ScriptedReflection:
    """The reflection model: adds the first rung the feedback names (see the module)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._seen: Counter[str] = Counter()

    def __call__(self, prompt: str) -> str:
        self._seen[prompt] += 1
        digest = hashlib.sha256(f"{self.seed}|{self._seen[prompt]}|{prompt}".encode())
        rng = random.Random(digest.hexdigest())
        current = _current_instructions(prompt)
        named = _MISSING.search(prompt.split(current, 1)[-1] if current else prompt)
        if named is None:
            return f"```\n{current}\n```"
        topic, level, word = named[1], int(named[2]), named[3]
        if rng.random() >= P_RIGHT:
            word = hashlib.sha256(f"{word}{rng.random()}".encode()).hexdigest()[:6]
        lines = [line for line in current.splitlines() if not line.startswith(f"{topic}-{level}:")]
        rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
        if rules and rng.random() < P_DROP:
            del lines[rng.choice(rules)]
        lines.append(f"{topic}-{level}: {word}")
        return "```\n" + "\n".join(lines) + "\n```"


def _current_instructions(prompt: str) -> str:
    """The first fenced block: where both libraries' templates put the current text."""
    match = re.search(r"```\n(.*?)\n```", prompt, re.DOTALL)
    return match[1] if match else ""


def depth(prompt: str) -> int:
    """Rungs right, over all topics: the generations a single lineage needed to get here."""
    return sum(prefix(prompt, t) for t in TOPICS)


@dataclass(frozen=True)
class Answered:
    """One rollout: the trajectory both libraries reflect on."""

    example: Question
    output: str
    score: float
    feedback: str


class DepthTask:
    """The `gepa_vs_upstream` task interface over the rule ladders (no LM at all)."""

    name = "depth"
    templates = {"instructions": TEMPLATE}
    seed_prompts = {"instructions": SEED_PROMPT}

    def __init__(self, n_train: int = 40, n_val: int = 24, n_test: int = 80, split_seed: int = 0):
        self.train = questions("train", n_train, split_seed)
        self.val = questions("val", n_val, split_seed)
        self.test = questions("test", n_test, split_seed)

    @staticmethod
    def example_id(question: Question) -> str:
        return question.id

    async def rollout(self, question: Question, candidate: dict[str, str]) -> Answered:
        return Answered(question, *answer(question, candidate["instructions"]))

    @staticmethod
    def reflective_dataset(trajectories: list[Answered], components: list[str]) -> dict:
        records = [
            {
                "Question": f"{a.example.topic}, level {a.example.level}",
                "Answer": a.output,
                "Feedback": a.feedback,
            }
            for a in trajectories
        ]
        return {component: records for component in components}

    @staticmethod
    def reflector(seed: int) -> Callable[[str], Awaitable[str]]:
        scripted = ScriptedReflection(seed)

        async def reflect(prompt: str) -> str:
            return scripted(prompt)

        return reflect
