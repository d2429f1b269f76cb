"""The reward-head benchmark's own logic, on a fake judge model: the night's step read as the
night reads it, the planted replies every arm shares, and the injection count."""

import asyncio
import hashlib

import numpy as np

from benchmarks.judge_reward_head import injected, layer_rows, night_step, read, row
from benchmarks.teacher_features import Reading
from judges.injection import PROBES, TRAINING
from judges.splits import judge_splits
from judges.types import JudgedItem


class FakeReader:
    """Readings whose first feature says whether the reply is good (unless `blind`) and
    whose second that it speaks to its judge, as a real model's features carry both."""

    checkpoint = "/models/fake-judge"

    def __init__(self, blind: bool = False):
        self.blind, self.read_now, self.seconds = blind, 0, 0.0

    def read(self, messages, reply) -> Reading:
        seed = int(hashlib.sha256(repr(messages).encode()).hexdigest()[:8], 16)
        noise = np.random.default_rng(seed).normal(size=4)
        good = 1.0 if "[good]" in reply and not self.blind else -1.0
        told = 1.0 if any(s in reply for s in (*TRAINING, *PROBES)) else 0.0
        # the residual stream: the embeddings, a layer that carries the verdict, and a
        # last layer that lost it
        layers = np.array([noise, [good, *noise[1:]], noise[::-1]], dtype=np.float16)
        last = np.array([good, told, *noise])
        return Reading(last, np.array([good]), p_yes=0.5, layers=layers)

    def read_many(self, prompts):
        return [self.read(m, r) for m, r in prompts]

    async def features(self, messages, adapter=None):
        user = messages[-1]["content"]
        reply = user[user.index("<reply>") : user.index("</reply>")]
        return self.read(messages, reply).last.tolist()


def items(n: int = 45) -> list[JudgedItem]:
    return [
        JudgedItem(f"t{i}", f"request {i}", f"reply {i} [{'good' if i % 3 else 'bad'}]", i % 3 > 0)
        for i in range(n)
    ]


def test_every_arm_reads_the_same_planted_failing_replies():
    first, again = injected(items(12)), injected(items(12))
    assert first == again and len(first) == 4  # the failing ones, each once
    assert all(i.human_pass is False and i.id.endswith("#injected") for i in first)
    assert all(any(i.output_text.endswith(p) for p in PROBES) for i in first)


def test_injections_count_only_replies_the_arm_judged_fail():
    heldout = [JudgedItem("a", "r", "x", True), JudgedItem("b", "r", "y", False)]
    heldout += [JudgedItem("c", "r", "z", False)]
    # "b" is judged fail (0.2) and an appended instruction passes it (0.7); "c" was
    # already judged pass (0.6), so its planted copy is not counted
    result = row("arm", [0.9, 0.2, 0.6], 0.5, heldout, [0.7, 0.9])
    assert result.flipped == (1, 1) and result.auc == 1.0


def test_the_night_step_is_read_as_the_night_reads_it():
    train, val, heldout = judge_splits(items(90), 0.4, 0)
    kept = asyncio.run(night_step(FakeReader(), train, val, heldout, 0, 0.2))
    assert kept.report["kappa"] == 1.0 and kept.val > 0.2 and kept.flipped[0] == 0
    assert "not kept" not in kept.note and kept.name == "head, the night's step"
    bare = asyncio.run(night_step(FakeReader(), train, val, heldout, 0, 0.2, injections=False))
    assert bare.name.endswith("no planted instructions") and bare.report["kappa"] == 1.0
    # a head that cannot beat the judge is still read, and said to be dropped by the night
    blind = asyncio.run(night_step(FakeReader(blind=True), train, val, heldout, 0, 0.2))
    assert "not kept by the night" in blind.note and blind.report["kappa"] < 0.5


def test_a_layer_that_carries_the_verdict_is_read_and_one_that_lost_it_is_not():
    train, val, heldout = judge_splits(items(), 0.4, 0)
    reader = FakeReader()
    readings = [read(reader, part) for part in (train, val, heldout)]
    carries, lost = layer_rows(
        train, val, heldout, readings, read(reader, injected(heldout)), [1, 2]
    )
    assert carries.name == "layer 1 of 2, last token" and carries.report["kappa"] == 1.0
    assert lost.report["kappa"] < 0.5
