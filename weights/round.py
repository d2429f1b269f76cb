"""One slow-loop round: sample, judge, keep the best (rejection sampling) or pair the best
with the worst, train a LoRA adapter with SFT, DPO, GRPO (the judge scoring the replies
it samples as it trains) or SFT then one of those (`lora.method`), and
keep it only if the judge prefers it on the Pareto set (never held-out, which only
reports). A round starts from the adapter in production when there
is one: it samples with it, compares against it, and (`lora.continue_from_production`)
trains on from it, so each night's weights build on the last.

The round takes what it needs as arguments: judged rollouts of the current prompts as a
callable, and a model that serves adapters (`AdapterLM`: the local engine, or vLLM with
runtime LoRA loading), so it knows neither the agent nor the judge nor the backend.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from statistics import fmean
from typing import Any

from infra.lm import LM, AdapterLM
from infra.lm.heap import release_free_heap
from infra.lm.threads import run_in_own_thread
from infra.settings import LoraSettings
from infra.types import Example, Rollout
from weights.adapters import adapter_files_ok
from weights.datasets import dpo_records, grpo_records, sft_records
from weights.lora import (
    TRAINING_SUMMARY,
    NoRecordFits,
    ProgressCallback,
    StepLog,
    checkpoints,
    saved_at_step,
    train_dpo_adapter,
    train_grpo_adapter,
    train_sft_adapter,
)
from weights.rewards import ReplyJudge, judge_reward

# (examples, adapter name or None, judged=True, **sampling params) -> the rollouts, judged
# (judged=False: unscored, read only for each example's chat)
JudgedRollouts = Callable[..., Awaitable[list[Rollout]]]
TRAINING_SETS = "training"  # in the round's folder: each stage's records, a JSON per line


@dataclass(frozen=True)
class ServedAdapter:
    """An adapter folder and the name the model serves it under."""

    name: str
    path: str


@dataclass
class LoraRound:
    trained_path: str | None  # the adapter this round trained, if it trained one
    kept: bool  # whether the judge preferred it on the Pareto set
    records: int
    train_loss: float | None
    val_without: float
    val_with: float | None
    note: str = ""
    training_sets: tuple[str, ...] = ()  # the records each stage trained on (JSONL files)
    base_adapter: str | None = None  # the served adapter it sampled with
    trained_from: str | None = None  # the adapter folder training went on from; None: base
    train_steps: int = 0  # optimizer steps, all stages
    train_seconds: float = 0.0  # training's wall time, all stages (GRPO's sampling included)
    train_device: str = ""  # where the last stage trained, e.g. "cpu (float32)"; "": unknown
    # per optimizer step, what the trainer logged, stages one after another (a later
    # stage's steps numbered on from the earlier's): the round's training curve
    history: tuple[StepLog, ...] = ()
    # (optimizer step, score on `valset`): where training started (step 0, `val_without`)
    # and each adapter compared there, its checkpoints and its end
    val_curve: tuple[tuple[int, float], ...] = ()

    @property
    def adapter_path(self) -> str | None:
        """The adapter that goes into the registered version, if any."""
        return self.trained_path if self.kept else None


async def lora_round(
    lm: AdapterLM | LM,
    rollouts: JudgedRollouts,
    trainset: list[Example],
    valset: list[Example],
    cfg: LoraSettings,
    run_dir: Path,
    min_score: float,
    seed: int,
    base: ServedAdapter | None = None,
    adapter_name: str | None = None,
    human: Mapping[str, Sequence[tuple[str, float]]] | None = None,
    judge_replies: ReplyJudge | None = None,
    progress: ProgressCallback | None = None,
    before_training: Callable[[], Awaitable[object]] | None = None,
) -> LoraRound:
    """Train in `run_dir` on `trainset`'s best judged samples (score >= `min_score`, or
    `cfg.min_judge_score` when set) and compare with it and with `base` (the adapter the
    rollouts ran with, served; None: the base model) on `valset`. The new adapter is
    served as `adapter_name` (default "adapter-<run_dir's name>"): unique per night, since
    a model server keeps what it loaded. `human`: example id -> replies a person scored
    in [0, 1] (a logged reply they passed or failed, one they corrected it to, one the
    teacher wrote from their comment), which train first (`training_sets`).
    `judge_replies` scores replies GRPO samples (needed by the grpo methods). `progress`
    hears each optimizer step, from the training thread (`weights.lora.ProgressCallback`).
    `before_training` runs once the samples are judged, before the first optimizer step:
    where models that training does not call let go of their memory."""
    if "grpo" in cfg.method and judge_replies is None:
        raise ValueError(f"lora.method {cfg.method!r} needs a judge for the replies it samples")
    before = base.name if base else None
    without = fmean(r.score for r in await rollouts(valset, before))
    if not cfg.enabled:
        return LoraRound(None, False, 0, None, without, None, note="disabled in settings")
    if not hasattr(lm, "load_adapter"):  # not isinstance: that would resolve base_model_path
        note = f"{type(lm).__name__} does not serve LoRA adapters"
        return LoraRound(None, False, 0, None, without, None, note=note)
    # GRPO alone reads only the prompts: one sample per example gives them; without
    # judged rollouts, samples only carry each example's chat for people's replies
    judge_samples = cfg.judged_rollouts or "grpo" in cfg.method
    draws = cfg.samples_per_example if judge_samples and cfg.method != "grpo" else 1
    samples = await asyncio.gather(
        *(
            rollouts(
                trainset, before, temperature=cfg.sample_temperature, seed=k, judged=judge_samples
            )
            for k in range(draws)
        )
    )
    sampled = [rollout for batch in samples for rollout in batch]
    labelled = human_rollouts(sampled, human or {})
    judged = sampled if judge_samples else []
    cut = min_score if cfg.min_judge_score is None else cfg.min_judge_score
    stages, skipped = training_sets(judged, cut, cfg, seed, labelled)
    if not stages:
        return LoraRound(None, False, 0, None, without, None, note=skipped)
    start = base.path if base and cfg.continue_from_production else None
    grpo = "grpo" in cfg.method  # then judge_replies was checked above
    reward = judge_reward(judge_replies, sampled, asyncio.get_running_loop()) if grpo else None
    if before_training is not None:
        await before_training()
    steps, seconds, history = 0, 0.0, []
    for k, (kind, stage) in enumerate(stages):  # each stage goes on from the one before
        target = run_dir / ("adapter" if k == len(stages) - 1 else f"adapter-{kind}")
        # what sampling (or the stage before) freed goes back first, so training does not
        # stack on top of it
        await release_free_heap()
        try:
            adapter_dir, summary = await train_once(
                kind, lm.base_model_path, start, stage, target, cfg, seed, reward, progress
            )
        except NoRecordFits as err:  # the night goes on from the state before this step
            return LoraRound(None, False, 0, None, without, None, note=f"{kind}: {err}")
        start, train_loss = str(adapter_dir), summary["train_loss"]
        history += [log | {"step": steps + log["step"]} for log in summary.get("history", ())]
        steps, seconds = steps + int(summary["steps"]), seconds + summary["seconds"]
        device = str(summary.get("device", ""))  # an adapter saved before it was recorded
    await release_free_heap()  # and training's, before the adapter is served
    sets = tuple(str(_training_set(run_dir, kind)) for kind, _ in stages)
    records = sum(len(stage) for _, stage in stages)
    try:
        served = ServedAdapter(adapter_name or f"adapter-{run_dir.name}", str(adapter_dir))
        name = await ensure_adapter(lm, served)
    except Exception as err:  # e.g. a server without runtime LoRA loading
        note = (
            f"trained {adapter_dir}, but the model server could not load it ({err}); a "
            "server without LoRA wants lora.enabled = false"
        )
        return LoraRound(
            None, False, records, train_loss, without, None, note, sets, before,
            train_steps=steps, train_seconds=seconds, train_device=device,
            history=tuple(history), val_curve=((0, without),),
        )  # fmt: skip
    chosen, with_adapter, stopped, scores = await _best_checkpoint(
        lm, rollouts, valset, name, adapter_dir
    )
    # the last stage's checkpoints are numbered by its own steps: on from the earlier's
    last = int(summary["steps"])
    curve = [(0, without)] + [(steps - last + saved_at_step(path, last), s) for path, s in scores]
    keep = with_adapter >= without
    # only the judge's view: a night with a selection slice decides on that (flows.night.schedule)
    not_kept = "" if keep else f"the judge preferred {_what(base)} on the Pareto set"
    return LoraRound(
        trained_path=str(chosen),
        kept=keep,
        records=records,
        train_loss=train_loss,
        val_without=without,
        val_with=with_adapter,
        note="; ".join(n for n in (skipped, stopped, not_kept) if n),
        training_sets=sets,
        base_adapter=before,
        trained_from=base.path if base and cfg.continue_from_production else None,
        train_steps=steps,
        train_seconds=seconds,
        train_device=device,
        history=tuple(history),
        val_curve=tuple(sorted(curve)),
    )


async def _best_checkpoint(
    lm: AdapterLM, rollouts: JudgedRollouts, valset: list[Example], name: str, final: Path
) -> tuple[Path, float, str, list[tuple[Path, float]]]:
    """The adapter among the run's checkpoints and its end that the judge scores best on
    `valset` (ties: the earliest, the least moved), served as `name`; its score, a
    sentence when an earlier one won, and every adapter's score."""
    earlier = checkpoints(final)
    scores = {final: fmean(r.score for r in await rollouts(valset, name))}
    for path in earlier:
        trial = f"{name}-{path.name}"
        await lm.load_adapter(trial, str(path))
        scores[path] = fmean(r.score for r in await rollouts(valset, trial))
        await lm.unload_adapter(trial)  # a served adapter holds a whole weight set
    order = [*earlier, final]
    best = max(order, key=lambda path: (scores[path], -order.index(path)))
    scored = [(path, scores[path]) for path in order]
    if best == final:
        return final, scores[final], "", scored
    await lm.load_adapter(name, str(best))  # the name now serves the one kept
    return (
        best,
        scores[best],
        (
            f"stopped early: the judge scored {best.name} {scores[best]:.3f} on the Pareto set, "
            f"the end of training {scores[final]:.3f}"
        ),
        scored,
    )


def human_rollouts(
    sampled: list[Rollout], human: Mapping[str, Sequence[tuple[str, float]]]
) -> list[Rollout]:
    """People's replies as rollouts, scored as they said: a reply they passed or that was
    written as the correction 1, one they failed or corrected 0. Each is paired with the
    chat of its example's first sample, so only examples that were sampled (the training
    split) get one: a held-out trace's label never reaches training."""
    first: dict[str, Rollout] = {}
    for rollout in sampled:
        first.setdefault(rollout.example.id, rollout)
    return [
        replace(sample, output=output, score=score, usage={})
        for example_id, replies in sorted(human.items())
        if (sample := first.get(example_id)) is not None
        for output, score in replies
        if output.strip()
    ]


def training_sets(
    judged: list[Rollout],
    cut: float,
    cfg: LoraSettings,
    seed: int,
    labelled: list[Rollout] = (),  # type: ignore[assignment]
) -> tuple[list[tuple[str, list[dict]]], str]:
    """The training stages `cfg.method` asks for, each with its records, in order (empty
    ones left out), and a sentence on any left out.

    What people said comes first and whole: SFT on every reply they passed or wrote (or
    the teacher wrote from their comment), DPO on each corrected reply against the one it
    corrects. The judge's samples follow, on the examples people said nothing usable
    about, up to `max_train_examples` records: a judge that agrees with people at kappa
    0.6 still passes wrong replies, so its samples never outrank a label."""
    targeted = {r.example.id for r in labelled if r.score == 1.0}
    others = [r for r in judged if r.example.id not in targeted]
    # a reply people failed with nothing to say instead: the rejected of a judged pair
    failed = [r for r in labelled if r.example.id not in targeted]
    cap = cfg.max_train_examples

    def sft() -> list[dict]:
        return sft_records(labelled, 1.0, len(labelled), seed) + sft_records(others, cut, cap, seed)

    def dpo() -> list[dict]:
        pairs = dpo_records(others + failed, cfg.dpo_margin)[:cap]
        return dpo_records(labelled, cfg.dpo_margin) + pairs

    sets = {"sft": sft, "dpo": dpo, "grpo": lambda: grpo_records(judged, cap, seed)}
    why = {
        "sft": "no label said what to reply, and no rollout passed the judge",
        "dpo": (
            f"no correction to pair, and no example's samples differed by dpo_margin "
            f"({cfg.dpo_margin}) in judge score"
        ),
        "grpo": "no rollout to take a prompt from",
    }
    stages, skipped = [], []
    for kind in cfg.method.split("+"):
        records = sets[kind]()
        if records:
            stages.append((kind, records))
        else:
            skipped.append(why[kind])
    return stages, "; ".join(skipped)


async def ensure_adapter(lm: AdapterLM, adapter: ServedAdapter) -> str:
    """Serve an adapter once (a resumed night may find it served); returns its name."""
    if adapter.name not in await lm.adapters():
        await lm.load_adapter(adapter.name, adapter.path)
    return adapter.name


def _training_set(run_dir: Path, kind: str) -> Path:
    return run_dir / TRAINING_SETS / f"{kind}.jsonl"


def _what(base: ServedAdapter | None) -> str:
    return "the base model" if base is None else f"the adapter in production ({base.name})"


async def train_once(
    kind: str,
    model: str,
    start: str | None,
    records: list[dict],
    target: Path,
    cfg: LoraSettings,
    seed: int,
    reward: Callable[..., Awaitable[list[float | None]]] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Train one stage's adapter into `target`, or reuse it if a crash came after training
    finished (the adapter folder appears whole, with its summary, or not at all); the
    adapter and its training summary. Its records are written first, beside it, and kept
    with a reused adapter: they are the ones it was trained on, not a resumed night's new
    samples. `reward`: GRPO's. The summary is `TRAINING_SUMMARY`'s: figures, and the
    device it trained on and its per-step history where it says. `progress` hears each
    optimizer step (a reused adapter: none)."""
    if adapter_files_ok(target) and (target / TRAINING_SUMMARY).exists():
        return target, json.loads((target / TRAINING_SUMMARY).read_text())
    path = _training_set(target.parent, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    unfinished = path.with_name(f".{path.name}.partial")
    unfinished.write_text("".join(json.dumps(record) + "\n" for record in records))
    unfinished.replace(path)
    train = {
        "sft": train_sft_adapter,
        "dpo": train_dpo_adapter,
        "grpo": partial(train_grpo_adapter, reward=reward),
    }[kind]
    # a thread that ends with training, so its OpenMP pool does not slow the batcher after
    # (and leaves the night's loop free to run GRPO's judge calls meanwhile)
    heard = {"progress_callback": progress} if progress else {}
    result = await run_in_own_thread(
        train, records, model, target, cfg, seed=seed, base_adapter=start, **heard
    )
    return result.path, result.to_json()
