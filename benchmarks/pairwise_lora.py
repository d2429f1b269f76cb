"""The MT-Bench benchmark's LoRA judge arms: a pairwise judge whose weights learn the
experts' preferences, on a rubric (the seed's, or the one alignment chose).

Records: `judges.lora_records.pairwise_records` on the training items, each pair in both
orders with the letter of the preferred answer following it, so the position an answer
is shown in carries no signal. Trained with `weights.lora.train_sft_adapter` (the letter
as the completion; the night's judge LoRA settings, `JudgeLoraSettings`, with a sequence
length that holds the longest pair), saved at evenly spaced checkpoints. Each
checkpoint's position lean and threshold on p_a are fitted on train and the one with the best
validation kappa is kept (early stopping, read after the run); held-out items are only
reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.pairwise_scoring import Agreement, Fit, VerdictCache, heldout_agreement
from infra.lm import LM
from infra.lm.threads import run_in_own_thread
from infra.settings import LoraSettings
from judges.lora_records import pairwise_records
from judges.pairwise import PairwiseJudge
from judges.types import PairwiseItem
from weights.lora import saved_adapters, train_sft_adapter

Split = tuple[list[PairwiseItem], list[PairwiseItem], list[PairwiseItem]]


@dataclass
class LoraArm:
    name: str
    records: int  # both orders of each training pair
    trained_on: int  # of them, records that fit the sequence length
    steps: int
    train_s: float
    fit: Fit  # the kept checkpoint's lean and threshold
    heldout: Agreement
    checkpoints: dict[str, float]  # folder name -> val kappa
    kept: str  # the checkpoint read on held-out
    record: str = "both orders of each training pair"  # what one training record is

    @property
    def val_kappa(self) -> float:
        return self.checkpoints[self.kept]


async def lora_arm(
    lm: LM,
    name: str,
    prompts: dict[str, str],
    split: Split,
    cache: VerdictCache,
    cfg: LoraSettings,
    folder: Path,
    seed: int,
    chunk: int,
) -> LoraArm:
    """Train a pairwise judge adapter on `prompts` and read it as the seed judge is read."""
    train, val, heldout = split
    records = pairwise_records(PairwiseJudge(lm, prompts), train)
    started = time.perf_counter()
    result = await run_in_own_thread(
        train_sft_adapter, records, lm.base_model_path, folder, cfg, seed=seed
    )
    seconds = time.perf_counter() - started
    scored: dict[str, float] = {}
    best: tuple[Fit, Path] | None = None
    for path in saved_adapters(result.path):
        fit = await cache.fit(lm, prompts, train, val, chunk, str(path))
        scored[path.name] = fit.val_kappa
        if best is None or fit.val_kappa > best[0].val_kappa:
            best = (fit, path)
    assert best is not None  # training always saves its final adapter
    fit, kept = best
    verdicts = await cache.judge(lm, prompts, heldout, chunk, str(kept))
    return LoraArm(
        name=name,
        records=len(records),
        trained_on=result.examples,
        steps=result.steps,
        train_s=seconds,
        fit=fit,
        heldout=heldout_agreement(verdicts, fit, heldout),
        checkpoints=scored,
        kept=kept.name,
    )
