"""The MT-Bench benchmark's pairwise LoRA judge on a scripted model: the judge serves its
adapter, every pair trains in both orders, and the checkpoint that agrees best on
validation is the one read on held-out items."""

import math
from pathlib import Path

from benchmarks import pairwise_lora
from benchmarks.pairwise_lora import lora_arm
from benchmarks.pairwise_scoring import VerdictCache
from infra.settings import JudgeLoraSettings
from judges.adapter import served_name
from judges.pairwise import SEED_PAIRWISE_PROMPTS, PairwiseJudge
from judges.types import PairwiseItem
from weights.lora import CHECKPOINTS, AdapterResult


class PairwiseAdapterLM:
    """The base model says "A" (the answer shown first) with 0.9; adapter "sharp" gives 0.9
    to the answer marked [good] wherever it is shown; adapter "coin" says 0.5."""

    def __init__(self):
        self.served: dict[str, str] = {}  # name -> folder
        self.loads = 0
        self.ran_on: list[str | None] = []

    async def adapters(self) -> list[str]:
        return list(self.served)

    async def load_adapter(self, name: str, path) -> None:
        self.loads += 1
        self.served[name] = str(path)

    async def choice_logprobs(self, messages, choices, adapter=None) -> list[float]:
        self.ran_on.append(adapter)
        skill = (Path(self.served[adapter]) / "skill").read_text() if adapter else "base"
        shown_first = messages[1]["content"].split("Answer B:")[0]
        p_first = {"base": 0.9, "coin": 0.5}.get(skill, 0.9 if "[good]" in shown_first else 0.1)
        return [math.log(p_first), math.log(1 - p_first)]


def pairs(n: int, prefix: str) -> list[PairwiseItem]:
    """Half the items prefer A, half B: the better answer is marked [good]."""
    out = []
    for i in range(n):
        good_first = i % 2 == 0
        a, b = ("x [good]", "y") if good_first else ("x", "y [good]")
        out.append(
            PairwiseItem(
                f"{prefix}{i}", f"q-{prefix}{i}", f"Q{i}?", a, b, "A" if good_first else "B"
            )
        )
    return out


def saved(folder: Path, skill: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "skill").write_text(skill)
    return folder


async def test_a_pairwise_judge_serves_its_adapter_once_for_all_its_calls(tmp_path):
    lm = PairwiseAdapterLM()
    folder = saved(tmp_path / "judge", "sharp")
    judge = PairwiseJudge(lm, SEED_PAIRWISE_PROMPTS, adapter=str(folder))
    verdicts = await judge.verdicts(pairs(4, "t"))
    assert [v.prefers for v in verdicts] == ["A", "B", "A", "B"]
    assert not any(v.order_flip for v in verdicts)
    assert lm.loads == 1 and set(lm.ran_on) == {served_name(folder)}
    base = await PairwiseJudge(lm, SEED_PAIRWISE_PROMPTS).verdicts(pairs(4, "t"))
    assert all(v.order_flip for v in base)  # position bias: the adapter is what moved


async def test_the_lora_arm_trains_both_orders_and_keeps_the_best_validation_checkpoint(
    tmp_path, monkeypatch
):
    trained: list[list] = []

    def fake_training(records, base_model_path, output_dir, cfg, *, seed=0):
        """The run "saved" a sharp checkpoint midway and ended overfit on a coin."""
        trained.append(records)
        saved(Path(output_dir) / CHECKPOINTS / "step-2", "sharp")
        saved(Path(output_dir) / CHECKPOINTS / "step-1", "coin")
        (Path(output_dir) / "skill").write_text("coin")
        return AdapterResult(Path(output_dir), 0.1, 3, len(records), 1.0)

    monkeypatch.setattr(pairwise_lora, "train_sft_adapter", fake_training)
    lm = PairwiseAdapterLM()
    lm.base_model_path = "base"
    split = (pairs(6, "t"), pairs(4, "v"), pairs(6, "h"))
    cfg = JudgeLoraSettings().training()
    arm = await lora_arm(
        lm, "LoRA judge", SEED_PAIRWISE_PROMPTS, split, VerdictCache(), cfg, tmp_path / "a", 0, 8
    )

    records = trained[0]
    assert arm.records == len(records) == 12  # each training pair in both orders
    assert sorted(r["completion"][0]["content"] for r in records) == ["A"] * 6 + ["B"] * 6
    assert list(arm.checkpoints) == ["step-1", "step-2", "a"]  # step order, then the end
    assert arm.kept == "step-2" and arm.val_kappa == 1.0
    assert arm.checkpoints["a"] == 0.0  # the end of training was not better
    assert arm.heldout.accuracy.value == 1.0 and arm.heldout.flip.value == 0.0
