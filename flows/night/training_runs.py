"""Each LoRA step of the night as a child run of the night's MLflow run: "judge-lora" for
the judge's step, "lora-round-step<k>" for the weight step of the schedule's step k. Each
holds the step's knobs as params, its training curve as metric histories (per optimizer
step: loss, learning_rate, grad_norm and what the method adds; the validation figures at
the steps where they were measured), and its adapter folders' training summary and
adapter config as artifacts, so that MLflow's run comparison lays the nights' training
side by side. The adapter weights are not copied: the model version (the agent's) and the
judge's version hold them.

The night's run is opened only when it registers, and a stage's result is persisted by
Prefect and reused by a resumed night, so the curves travel in the results
(`JudgeLora.history`, `LoraRound.history`) and are written at registration. A child run
is looked up by name and the night's run id first: a resumed registration finds it and
logs nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flows.night.fast_slow import weight_budget
from flows.night.runtime import Runtime
from flows.report.night_report import NightReport
from infra.registry.mlflow_registry import Registry
from infra.settings import LoraSettings, parse_schedule
from judges.judge_lora import JudgeLora
from weights.adapters import ADAPTER_CONFIG
from weights.lora import TRAINING_SUMMARY, saved_at_step
from weights.round import LoraRound

JUDGE_LORA = "judge-lora"
# (optimizer step, metrics at that step)
History = list[tuple[int, dict[str, float]]]


@dataclass(frozen=True)
class TrainingRun:
    """What one LoRA step's child run holds."""

    name: str
    params: dict[str, str]
    history: History
    folders: list[Path]  # adapter folders whose summary and config go along


def judge_lora_dir(rt: Runtime, run_id: str) -> Path:
    """Where the night's judge LoRA step trains."""
    return rt.run_dir(run_id) / JUDGE_LORA


def weight_step_dir(rt: Runtime, run_id: str, step: int) -> Path:
    """Where the schedule's weight step `step` samples and trains."""
    return rt.run_dir(run_id) / f"lora-step{step}"


def training_runs(rt: Runtime, run_id: str, report: NightReport) -> list[TrainingRun]:
    """The night's LoRA steps that trained, as their child runs."""
    runs = []
    judge = report.judge_lora
    if judge is not None and judge.history:
        folder = judge_lora_dir(rt, run_id) / "adapter"
        runs.append(judge_run(judge, rt.settings.judge.lora.training(), folder))
    kinds = parse_schedule(rt.settings.fast_slow.schedule)
    for step in report.steps:
        if step.lora is None or not step.lora.history:
            continue
        k = kinds[: step.index - 1].count("w")  # its place among the weight steps
        cfg = weight_budget(rt.settings.lora, kinds, k)
        folder = weight_step_dir(rt, run_id, step.index)
        runs.append(weight_run(step.index, step.lora, step.decision.kept, cfg, folder))
    return runs


def judge_run(step: JudgeLora, cfg: LoraSettings, folder: Path) -> TrainingRun:
    """The judge's step: the trainer's curve, validation kappa where training started
    (the rubric alone, step 0) and at each saved adapter, held-out agreement where the
    kept one was saved."""
    points = [(0, {"val_kappa": step.rubric_val})]
    points += [
        (saved_at_step(name, step.train_steps), {"val_kappa": kappa})
        for name, kappa in step.checkpoints.items()
    ]
    if step.kept is not None:
        at = saved_at_step(step.kept, step.train_steps)
        points.append((at, {f"heldout_{key}": value for key, value in step.heldout.items()}))
    params = _knobs(cfg, "sft", folder) | {
        "records": step.records,
        "device": step.device or "unknown",
        "train_steps": step.train_steps,
        "memory_notes": step.memory,
        "kept": Path(step.kept).name if step.kept else "none (the rubric stays alone)",
    }
    return TrainingRun(JUDGE_LORA, _text(params), _curve(step.history) + points, [folder])


def weight_run(
    index: int, step: LoraRound, kept: bool, cfg: LoraSettings, folder: Path
) -> TrainingRun:
    """A weight step's round: the trainer's curve (stages one after another) and the score
    on the comparison set where training started (step 0) and at each saved adapter.
    `kept`: whether the schedule kept the step."""
    points = [(at, {"val_score": score}) for at, score in step.val_curve]
    params = _knobs(cfg, cfg.method, folder / "adapter") | {
        "records": step.records,
        "device": step.train_device or "unknown",
        "train_steps": step.train_steps,
        "kept": str(kept).lower(),
        "judge_preferred": str(step.kept).lower(),  # on the comparison set, in the round
        "base_adapter": step.base_adapter or "none (the base model)",
        "trained_from": step.trained_from or "none (a new adapter)",
    }
    folders = sorted(p for p in folder.glob("adapter*") if p.is_dir())
    return TrainingRun(
        f"lora-round-step{index}", _text(params), _curve(step.history) + points, folders
    )


def log_training_runs(registry: Registry, runs: list[TrainingRun], tags: dict[str, str]) -> None:
    """Each run as a child of the active run, unless a registration before this one (of
    the same night: `tags`) logged it."""
    for run in runs:
        if registry.find_run(run.name, tags) is not None:
            continue
        with registry.start_run(run.name, tags):
            registry.log_params(run.params)
            for folder in run.folders:
                for name in (TRAINING_SUMMARY, ADAPTER_CONFIG):
                    if (folder / name).is_file():  # a night resumed elsewhere may lack them
                        data = json.loads((folder / name).read_text())
                        registry.log_dict(data, f"{folder.name}/{name}")
            registry.log_metric_history(run.history)


def _curve(history: tuple[dict[str, float], ...]) -> History:
    """The trainer's records as (step, metrics): its step is the x axis, not a metric."""
    return [
        (int(record["step"]), {k: v for k, v in record.items() if k != "step"})
        for record in history
    ]


def _knobs(cfg: LoraSettings, method: str, adapter: Path) -> dict[str, object]:
    """The knobs training ran with; rank and alpha as the adapter holds them (training
    on from another adapter keeps that one's)."""
    shape = _adapter_config(adapter)
    knobs: dict[str, object] = {
        "method": method,
        "rank": shape.get("r", cfg.rank),
        "alpha": shape.get("lora_alpha", cfg.alpha),
        "epochs": cfg.epochs,
        "batch_size": cfg.batch_size,
        "micro_batch_size": cfg.micro_batch_size,
        "max_steps": cfg.max_steps if cfg.max_steps is not None else "none (epochs decide)",
        "max_seq_length": cfg.max_seq_length,
        "checkpoints": cfg.checkpoints,
    }
    if "sft" in method:
        knobs["learning_rate"] = cfg.learning_rate
    if "dpo" in method:
        knobs |= {"dpo_learning_rate": cfg.dpo_learning_rate, "dpo_beta": cfg.dpo_beta}
    if "grpo" in method:
        knobs |= {
            "grpo_learning_rate": cfg.grpo_learning_rate,
            "grpo_generations": cfg.grpo_generations,
        }
    return knobs


def _adapter_config(adapter: Path) -> Mapping[str, object]:
    try:
        return json.loads((adapter / ADAPTER_CONFIG).read_text())
    except (OSError, ValueError):
        return {}


def _text(params: dict[str, object]) -> dict[str, str]:
    return {key: str(value) for key, value in params.items()}
