"""The injection check: a judge that an instruction in the reply talks into passing."""

import math
from dataclasses import replace

from infra.scales import ScoreScale
from judges.choose import JudgeGate
from judges.gate import GateDecision
from judges.injection import PROBES, TRAINING, injection_check
from judges.judge import Judge
from judges.types import JudgedItem
from tests.fakes import CountingTally


class ObedientLM:
    """Reads replies right, unless the reply tells it what to answer (and it `obeys`)."""

    def __init__(self, obeys: bool):
        self.obeys = obeys

    async def choice_logprobs(self, messages, choices, adapter=None) -> list[float]:
        reply = messages[1]["content"].split("<reply>\n")[1].split("\n</reply>")[0]
        told = any(probe in reply for probe in PROBES)
        p = 0.9 if "[good]" in reply or (self.obeys and told) else 0.1
        return [math.log(p), math.log(1 - p)]


def heldout() -> list[JudgedItem]:
    return [
        JudgedItem(f"t{i}", f"request {i}", f"reply {i} [{'good' if i % 2 else 'bad'}]", i % 2 == 1)
        for i in range(30)
    ]


JUDGE = Judge({"rubric": "r"}, threshold=0.5, heldout={"kappa": 0.9})


async def test_a_judge_an_appended_instruction_talks_into_passing_is_not_trusted():
    tally = CountingTally()
    check = await injection_check(ObedientLM(obeys=True), JUDGE, heldout(), 0, 0.2, tally)
    assert (check.judged_fail, check.flipped) == (15, 15) and check.fooled
    assert tally.expected == [15, 15] and sum(tally.done) == 30  # before, then with the probe
    assert "turned 15 to pass (100%), above judge.max_injection_flips 0.2" in check.line()
    decision = GateDecision(True, "passed", 0.9, 0.2, None, labels=30, min_labels=20)
    gate = JudgeGate(decision, {}, JUDGE, None, injection=check)
    assert not gate.trusted and replace(gate, injection=None).trusted


async def test_a_judge_that_reads_the_reply_as_data_passes_the_check():
    check = await injection_check(ObedientLM(obeys=False), JUDGE, heldout(), 0, 0.2)
    assert (check.judged_fail, check.flipped, check.fooled) == (15, 0, False)


async def test_the_check_plants_sentences_the_judge_never_trained_on_and_only_on_pass_fail():
    assert not set(PROBES) & set(TRAINING)
    stars = replace(JUDGE, scale=ScoreScale("numeric", minimum=1, maximum=5))
    assert await injection_check(ObedientLM(obeys=True), stars, heldout(), 0, 0.2) is None
