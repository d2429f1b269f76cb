"""Training a LoRA adapter on judged records, on CPU: supervised fine-tuning with trl's
SFTTrainer, preference tuning with its DPOTrainer, or online RL with its GRPOTrainer. All
share the model, the LoRA configuration and the folder handling; only the trainer and its
records differ."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from peft import LoraConfig, PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback, set_seed
from trl import DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

from infra.settings import LoraSettings

# Every linear layer of a Llama block: attention and MLP.
TRAINING_SUMMARY = "training.json"  # in the adapter folder: loss, steps, examples, seconds
CHECKPOINTS = "checkpoints"  # in the adapter folder: the run's earlier adapters, step-<n>
LLAMA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# (step, total_steps, latest training loss or None before the first log)
ProgressCallback = Callable[[int, int, float | None], None]
# trl's reward function: (prompts, completions, **the records' other columns) -> one
# reward per completion (None: not scored); sync, or async
RewardFunction = Callable[..., list[float | None] | Awaitable[list[float | None]]]


@dataclass(frozen=True)
class AdapterResult:
    path: Path
    train_loss: float  # mean over the run's steps
    steps: int
    examples: int  # records that fit `max_seq_length` and were trained on
    seconds: float

    def summary(self) -> dict[str, float]:
        return {
            "train_loss": self.train_loss,
            "steps": self.steps,
            "examples": self.examples,
            "seconds": self.seconds,
        }


def train_sft_adapter(
    records: list[dict],
    base_model_path: str | Path,
    output_dir: str | Path,
    cfg: LoraSettings,
    *,
    base_adapter: str | Path | None = None,
    progress_callback: ProgressCallback | None = None,
    seed: int = 0,
    bf16: bool | None = None,
) -> AdapterResult:
    """Train a LoRA adapter on prompt-completion records and save it into `output_dir`.

    Loss falls on the completion only. With `base_adapter`, training continues that adapter
    (its rank and targets win over `cfg`'s). `bf16=None` uses bf16 base weights and
    autocast where the CPU has native bf16 instructions (~3.5x faster than fp32 on an
    avx512_bf16 CPU, same loss curve); the LoRA matrices stay fp32.
    The adapter, tokenizer and training summary (`TRAINING_SUMMARY`) are written to a
    sibling temp folder and renamed into place, so `output_dir` either holds a whole
    adapter with its summary or does not exist.
    """
    specific = dict(
        learning_rate=cfg.learning_rate,
        max_length=cfg.max_seq_length,
        completion_only_loss=True,
        packing=False,
        activation_checkpointing=False,  # trl turns it on; memory is ample, speed is not
    )
    return _train(
        (SFTTrainer, SFTConfig, specific, ("prompt", "completion")),
        records, base_model_path, output_dir, cfg, base_adapter, progress_callback, seed, bf16,
    )  # fmt: skip


def train_dpo_adapter(
    records: list[dict],
    base_model_path: str | Path,
    output_dir: str | Path,
    cfg: LoraSettings,
    *,
    base_adapter: str | Path | None = None,
    progress_callback: ProgressCallback | None = None,
    seed: int = 0,
    bf16: bool | None = None,
) -> AdapterResult:
    """Train a LoRA adapter on preference records (prompt, chosen, rejected) with DPO and
    save it as `train_sft_adapter` does. The reference policy is where training starts:
    the base model, or a frozen copy of `base_adapter` (trl keeps it as a second adapter
    on the same weights, so no second model is loaded); `cfg.dpo_beta` is how far from it
    the adapter may move."""
    specific = dict(
        learning_rate=cfg.dpo_learning_rate, max_length=cfg.max_seq_length, beta=cfg.dpo_beta
    )
    return _train(
        (DPOTrainer, DPOConfig, specific, ("prompt", "chosen", "rejected")),
        records, base_model_path, output_dir, cfg, base_adapter, progress_callback, seed, bf16,
    )  # fmt: skip


def train_grpo_adapter(
    records: list[dict],
    base_model_path: str | Path,
    output_dir: str | Path,
    cfg: LoraSettings,
    reward: RewardFunction,
    *,
    base_adapter: str | Path | None = None,
    progress_callback: ProgressCallback | None = None,
    seed: int = 0,
    bf16: bool | None = None,
) -> AdapterResult:
    """Train a LoRA adapter online with GRPO and save it as `train_sft_adapter` does: for
    each prompt record the model being trained samples `cfg.grpo_generations` replies,
    `reward` scores them (trl runs an async one on its own event loop), and each reply is
    pushed by how far its reward is above its group's mean. No reference model (trl's
    default beta 0), so memory is SFT's plus generation's."""
    specific = dict(
        learning_rate=cfg.grpo_learning_rate,
        num_generations=cfg.grpo_generations,
        max_completion_length=cfg.grpo_max_completion_tokens,
        temperature=cfg.sample_temperature,
    )
    return _train(
        (partial(GRPOTrainer, reward_funcs=[reward]), GRPOConfig, specific, ("prompt",)),
        records, base_model_path, output_dir, cfg, base_adapter, progress_callback, seed, bf16,
    )  # fmt: skip


def _check_records(records: list[dict], fields: tuple[str, ...]) -> None:
    if not records:
        raise ValueError("no training records: nothing passed the judge's threshold")
    for i, record in enumerate(records):
        for name in fields:
            if not record.get(name):
                raise ValueError(f"record {i}: field {name!r} must be a non-empty message list")


class NoRecordFits(ValueError):
    """Every record is longer than `max_seq_length`: there is nothing to train on."""


def base_precision(bf16: bool | None = None) -> tuple[bool, torch.dtype]:
    """bf16 autocast and a bf16 frozen base where the CPU has native bf16 (or `bf16` says
    so), float32 elsewhere. The base is loaded in that dtype on purpose: left to the
    checkpoint's own (bf16), an AVX2-only CPU emulates every bf16 matmul, and a forward and
    backward pass ran 14x slower than in float32 there."""
    use_bf16 = torch.cpu._is_avx512_bf16_supported() if bf16 is None else bf16
    return use_bf16, torch.bfloat16 if use_bf16 else torch.float32


def training_arguments(scratch: str, cfg: LoraSettings, bf16: bool, seed: int) -> dict:
    """What every trl trainer here is given, whatever its method: the batch (micro-batches
    accumulated), the length of the run, CPU only, no saves or reports of its own."""
    return dict(
        output_dir=scratch,
        per_device_train_batch_size=min(cfg.micro_batch_size, cfg.batch_size),
        gradient_accumulation_steps=math.ceil(cfg.batch_size / cfg.micro_batch_size),
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,  # -1: trl's "epochs decide"
        bf16=bf16,
        use_cpu=True,
        dataloader_num_workers=0,
        save_strategy="no",
        report_to=[],
        logging_steps=1,
        disable_tqdm=True,
        seed=seed,
        data_seed=seed,
    )


# (trl trainer class, its config class, the config's own arguments, the record fields)
Method = tuple[Callable[..., Any], type, dict, tuple[str, ...]]


def _train(
    method: Method,
    records: list[dict],
    base_model_path: str | Path,
    output_dir: str | Path,
    cfg: LoraSettings,
    base_adapter: str | Path | None,
    progress_callback: ProgressCallback | None,
    seed: int,
    bf16: bool | None,
) -> AdapterResult:
    """Load the base (and `base_adapter`), train with `method`'s trainer, and move the
    adapter into `output_dir` whole, with its summary."""
    trainer_class, config_class, specific, fields = method
    _check_records(records, fields)
    output_dir = Path(output_dir)
    if output_dir.exists():
        raise FileExistsError(f"{output_dir} already exists; adapters are never overwritten")
    use_bf16, dtype = base_precision(bf16)

    started = time.perf_counter()
    set_seed(seed)  # before the LoRA matrices are initialised
    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    # The frozen base may as well be bf16 under bf16 autocast (half the memory, no per-step
    # weight casts); peft keeps the trainable LoRA matrices in fp32 either way.
    model = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=dtype)
    peft_config = None
    if base_adapter is None:
        peft_config = LoraConfig(
            r=cfg.rank,
            lora_alpha=cfg.alpha,
            lora_dropout=cfg.dropout,
            target_modules=LLAMA_TARGET_MODULES,
            task_type="CAUSAL_LM",
        )
    else:
        model = PeftModel.from_pretrained(model, str(base_adapter), is_trainable=True)

    partial = output_dir.with_name(f".{output_dir.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # left by a crashed earlier run
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flywheel-lora-") as scratch:
        trainer = trainer_class(
            model=model,
            args=config_class(**training_arguments(scratch, cfg, use_bf16, seed), **specific),
            train_dataset=Dataset.from_list(records),
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[_Checkpoints(partial / CHECKPOINTS, cfg.checkpoints)]
            + ([_Progress(progress_callback)] if progress_callback else []),
        )
        if len(trainer.train_dataset) == 0:  # trl left out every record as too long
            raise NoRecordFits(
                f"none of the {len(records)} records fits lora.max_seq_length "
                f"({cfg.max_seq_length} tokens)"
            )
        output = trainer.train()
        # only the trained adapter: DPO from an adapter keeps a frozen copy named "ref"
        trainer.model.save_pretrained(partial, selected_adapters=["default"])
        tokenizer.save_pretrained(partial)
    result = AdapterResult(
        path=output_dir,
        train_loss=output.training_loss,
        steps=output.global_step,
        examples=len(trainer.train_dataset),
        seconds=time.perf_counter() - started,
    )
    # inside the folder before the rename: a crash leaves the adapter with its summary or
    # neither, never an adapter a resumed night cannot account for
    (partial / TRAINING_SUMMARY).write_text(json.dumps(result.summary()))
    partial.rename(output_dir)
    return result


def checkpoints(adapter_dir: Path) -> list[Path]:
    """The earlier adapters a training run saved beside its final one, in step order."""
    found = (Path(adapter_dir) / CHECKPOINTS).glob("step-*")
    return sorted(found, key=lambda path: int(path.name.removeprefix("step-")))


def saved_adapters(adapter_dir: Path) -> list[Path]:
    """Every adapter a training run saved, in step order: its checkpoints, then its end."""
    return [*checkpoints(adapter_dir), Path(adapter_dir)]


class _Checkpoints(TrainerCallback):
    """Saves the adapter (only it) at `count - 1` evenly spaced steps before the end, so
    that the round can keep the one the judge scores best: early stopping, read after."""

    def __init__(self, folder: Path, count: int) -> None:
        self.folder, self.count, self.at = folder, count, set()

    def on_train_begin(self, args, state, control, **kwargs):
        total = state.max_steps
        self.at = {round(i * total / self.count) for i in range(1, self.count)} - {0, total}

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step in self.at:
            target = self.folder / f"step-{state.global_step}"
            model.save_pretrained(target, selected_adapters=["default"])


class _Progress(TrainerCallback):
    """Forwards each optimizer step and the latest logged loss to a plain function."""

    def __init__(self, report: ProgressCallback) -> None:
        self.report = report
        self.loss: float | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.loss = float(logs["loss"])
            self.report(state.global_step, state.max_steps, self.loss)
