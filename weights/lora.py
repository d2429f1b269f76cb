"""Training a LoRA adapter on judged records, on a CUDA GPU where there is one and on the
CPU otherwise (`lora.device`): supervised fine-tuning with trl's SFTTrainer, preference
tuning with its DPOTrainer, or online RL with its GRPOTrainer. All share the model, the
placement, the LoRA configuration and the folder handling; only the trainer and its
records differ."""

from __future__ import annotations

import copy
import importlib.util
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
from peft import LoraConfig, PeftModel, get_peft_model, prepare_model_for_kbit_training
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    BitsAndBytesConfig,
    PretrainedConfig,
    PrinterCallback,
    TrainerCallback,
    set_seed,
)
from trl import DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

from infra.settings import LoraSettings

# in the adapter folder: loss, steps, examples, seconds, and the device it trained on
TRAINING_SUMMARY = "training.json"
CHECKPOINTS = "checkpoints"  # in the adapter folder: the run's earlier adapters, step-<n>
# Every linear layer of a block, attention and MLP (`LoraTraining.rank` says why), by
# the checkpoint's config.model_type; any other architecture gets peft's "all-linear"
# (every linear layer but the output head), which finds the same layers by type.
_ATTENTION, _MLP = ("q_proj", "k_proj", "v_proj", "o_proj"), ("gate_proj", "up_proj", "down_proj")
TARGET_MODULES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"), _ATTENTION + _MLP
    ),
    "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),  # fused projections
}

# (optimizer step, total steps, that step's log: loss, learning_rate, grad_norm, ...)
ProgressCallback = Callable[[int, int, dict[str, float]], None]
# One optimizer step's figures as the trainer logged them, with its "step": the run's
# training curve, for MLflow's metric history (`AdapterResult.history`)
StepLog = dict[str, float]
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
    # where it trained, e.g. "cuda:0 (NVIDIA H100 80GB HBM3, bf16)" or "cpu (float32)";
    # "" for a result that does not say
    device: str = ""
    # per optimizer step, what the trainer logged (`step_logs`); () for a result from
    # before it was recorded
    history: tuple[StepLog, ...] = ()

    def summary(self) -> dict[str, float]:
        """The run's figures, numbers only: they go on as metrics."""
        return {
            "train_loss": self.train_loss,
            "steps": self.steps,
            "examples": self.examples,
            "seconds": self.seconds,
        }

    def to_json(self) -> dict[str, Any]:
        """What `TRAINING_SUMMARY` holds: the figures, the device and the per-step history,
        so a resumed night that reuses the adapter can still say where and how it trained."""
        return {**self.summary(), "device": self.device, "history": list(self.history)}


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
    (its rank and targets win over `cfg`'s). It runs where `cfg.device` says
    (`training_placement`). `bf16=None` uses bf16 base weights and autocast where the GPU
    supports bf16, or where the CPU has native bf16 instructions (~3.5x faster than fp32
    on an avx512_bf16 CPU, same loss curve); the LoRA matrices stay fp32.
    The adapter, tokenizer and training summary (`TRAINING_SUMMARY`) are written to a
    sibling temp folder and renamed into place, so `output_dir` either holds a whole
    adapter with its summary or does not exist.
    """
    specific = dict(
        learning_rate=cfg.learning_rate,
        max_length=cfg.max_seq_length,
        completion_only_loss=True,
        packing=False,
        # on a CPU (a GPU's run turns it back on: `training_arguments`): trl turns it on;
        # memory is ample there, speed is not
        activation_checkpointing=False,
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


@dataclass(frozen=True)
class Placement:
    """Where a training run goes and in what precision: decided once, before the base is
    loaded, and reported with the result (`AdapterResult.device`)."""

    device: str  # "cpu" or "cuda"
    bf16: bool  # bf16 autocast and a bf16 frozen base; float32 otherwise
    four_bit: bool = False  # the frozen base in 4-bit nf4 (QLoRA)

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.bf16 else torch.float32

    def describe(self) -> str:
        """e.g. "cuda:0 (NVIDIA H100 80GB HBM3, bf16)" or "cpu (float32)"."""
        precision = "bf16" if self.bf16 else "float32"
        if self.four_bit:
            precision = f"4-bit nf4 base, {precision}"
        if self.device == "cpu":
            return f"cpu ({precision})"
        index = torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)}, {precision})"


def training_placement(cfg: LoraSettings, bf16: bool | None = None) -> Placement:
    """The device `cfg.device` asks for and the precision it trains in there. "auto" takes
    CUDA when torch sees it: a GPU step is what makes a LoRA round minutes, not hours. On
    the CPU this is `base_precision`, as it always was; on a GPU, bf16 where it supports
    it. `bf16` overrides the precision either way."""
    cuda = torch.cuda.is_available()
    if cfg.device == "cuda" and not cuda:
        raise ValueError(
            "lora.device is 'cuda' but torch sees no CUDA device (a CPU-only torch build, or "
            "no GPU visible to this process); set it to 'auto' or 'cpu'."
        )
    on_gpu = cuda and cfg.device != "cpu"
    if cfg.quantize == "4bit":
        _check_four_bit(on_gpu, cfg.device)
    if on_gpu:
        use_bf16 = torch.cuda.is_bf16_supported() if bf16 is None else bf16
    else:
        use_bf16, _ = base_precision(bf16)
    return Placement("cuda" if on_gpu else "cpu", use_bf16, cfg.quantize == "4bit")


def _check_four_bit(on_gpu: bool, device: str) -> None:
    """QLoRA's 4-bit base runs on bitsandbytes' CUDA kernels alone."""
    if not on_gpu:
        where = "lora.device is 'cpu'" if device == "cpu" else "torch sees no CUDA device"
        raise ValueError(
            f"lora.quantize '4bit' needs a CUDA device, but {where}; set it to 'none'."
        )
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ValueError(
            "lora.quantize '4bit' needs the bitsandbytes package, which is not installed; "
            "install it or set lora.quantize to 'none'."
        )


def target_modules(model_type: str) -> list[str] | str:
    """The layers LoRA goes on for an architecture: the table's, else peft's "all-linear"."""
    known = TARGET_MODULES.get(model_type)
    return list(known) if known else "all-linear"


def lora_config(cfg: LoraSettings, base_model_path: str | Path) -> LoraConfig:
    """The adapter to train afresh on the base: `cfg`'s shape on its architecture's layers,
    checked first on a weightless copy of the architecture, so that a model LoRA cannot be
    put on fails as one sentence before any weights load, not deep inside trl."""
    config = AutoConfig.from_pretrained(base_model_path)
    peft_config = LoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=target_modules(config.model_type),
        task_type="CAUSAL_LM",
    )
    _check_placement(config, peft_config, base_model_path)
    return peft_config


def _check_placement(
    config: PretrainedConfig, peft_config: LoraConfig, base_model_path: str | Path
) -> None:
    with torch.device("meta"):  # no memory: the layers' names and types are what peft reads
        skeleton = AutoModelForCausalLM.from_config(config)
    try:
        get_peft_model(skeleton, copy.deepcopy(peft_config))
    except Exception as err:
        raise _unplaceable(config.model_type, base_model_path, err) from err


def _unplaceable(model_type: str, base_model_path: str | Path, err: Exception) -> ValueError:
    return ValueError(
        f"LoRA cannot be placed on model_type {model_type!r} of {base_model_path} "
        f"({str(err).rstrip('.')}); add its layer names to weights.lora.TARGET_MODULES."
    )


def run_length(cfg: LoraSettings, records: int) -> int:
    """trl's `max_steps` for `records`: `cfg.max_steps` where `epochs` passes over them
    would run longer, else -1 ("the epochs decide"). trl's own max_steps overrides the
    epochs and would go round small record sets again and again; ours is a cap. GRPO
    samples as it trains, so its steps are its own to count."""
    if cfg.max_steps is None:
        return -1
    if "grpo" in getattr(cfg, "method", ""):
        return cfg.max_steps
    passes = cfg.epochs * math.ceil(records / cfg.batch_size)
    return cfg.max_steps if cfg.max_steps < passes else -1


def training_arguments(
    scratch: str, cfg: LoraSettings, placement: Placement, seed: int, records: int
) -> dict:
    """What every trl trainer here is given, whatever its method: the batch (micro-batches
    accumulated), the length of the run (`run_length`), the device, no saves or reports of
    its own. Its keys win over a method's own: on a GPU, activations are recomputed in the backward
    pass whatever the method does on a CPU, since there memory is what runs out."""
    on_gpu = placement.device == "cuda"
    return dict(
        output_dir=scratch,
        per_device_train_batch_size=min(cfg.micro_batch_size, cfg.batch_size),
        gradient_accumulation_steps=math.ceil(cfg.batch_size / cfg.micro_batch_size),
        num_train_epochs=cfg.epochs,
        max_steps=run_length(cfg, records),
        bf16=placement.bf16,
        use_cpu=not on_gpu,
        **({"activation_checkpointing": True} if on_gpu else {}),
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
    placement = training_placement(cfg, bf16)
    peft_config = lora_config(cfg, base_model_path) if base_adapter is None else None

    started = time.perf_counter()
    set_seed(seed)  # before the LoRA matrices are initialised
    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    model = load_base(base_model_path, placement)
    if base_adapter is not None:
        try:
            model = PeftModel.from_pretrained(model, str(base_adapter), is_trainable=True)
        except ValueError as err:  # its targets are not layers of this base
            raise _unplaceable(model.config.model_type, base_model_path, err) from err

    partial = output_dir.with_name(f".{output_dir.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # left by a crashed earlier run
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flywheel-lora-") as scratch:
        trainer = trainer_class(
            model=model,
            args=config_class(
                **(specific | training_arguments(scratch, cfg, placement, seed, len(records)))
            ),
            train_dataset=Dataset.from_list(records),
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[_Checkpoints(partial / CHECKPOINTS, cfg.checkpoints)]
            + ([_Progress(progress_callback)] if progress_callback else []),
        )
        if progress_callback:  # the caller shows each step: no second display on stdout
            trainer.remove_callback(PrinterCallback)
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
        device=placement.describe(),
        history=step_logs(trainer.state.log_history),
    )
    # inside the folder before the rename: a crash leaves the adapter with its summary or
    # neither, never an adapter a resumed night cannot account for
    (partial / TRAINING_SUMMARY).write_text(json.dumps(result.to_json()))
    partial.rename(output_dir)
    return result


def step_logs(log_history: list[dict[str, Any]]) -> tuple[StepLog, ...]:
    """The trainer's `state.log_history` as one record of numbers per optimizer step (with
    `logging_steps=1`, every step): loss, learning_rate, grad_norm and whatever the method
    adds (DPO's rewards, GRPO's). The run's closing record (train_runtime, the mean
    train_loss) is left out: `AdapterResult.summary` holds those."""
    return tuple(
        {key: float(value) for key, value in record.items() if _number(value)}
        for record in log_history
        if "step" in record and "train_runtime" not in record
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def load_base(base_model_path: str | Path, placement: Placement) -> torch.nn.Module:
    """The frozen base as `placement` wants it. It may as well be bf16 under bf16 autocast
    (half the memory, no per-step weight casts); peft keeps the trainable LoRA matrices in
    fp32 either way. The trainer moves a plain base to the GPU; a 4-bit one is put there
    as it loads (computing in bf16 where the GPU has it), and prepared for training as
    peft's QLoRA recipe says (its other weights in fp32, activations recomputed)."""
    if not placement.four_bit:
        return AutoModelForCausalLM.from_pretrained(base_model_path, dtype=placement.dtype)
    quantization = BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=placement.dtype
    )
    model = AutoModelForCausalLM.from_pretrained(
        base_model_path,
        dtype=placement.dtype,
        quantization_config=quantization,
        device_map={"": torch.cuda.current_device()},
    )
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)


def checkpoints(adapter_dir: Path) -> list[Path]:
    """The earlier adapters a training run saved beside its final one, in step order."""
    found = (Path(adapter_dir) / CHECKPOINTS).glob("step-*")
    return sorted(found, key=lambda path: int(path.name.removeprefix("step-")))


def saved_at_step(adapter: Path | str, last: int) -> int:
    """The optimizer step an adapter of a run was saved at: a checkpoint's (`step-<n>`),
    else `last`, the run's end."""
    name = Path(adapter).name
    return int(name.removeprefix("step-")) if name.startswith("step-") else last


def training_folder(adapter: Path) -> Path:
    """The folder of the training run an adapter was saved by: the adapter's own, or, for
    one of its checkpoints, the run's end (where `TRAINING_SUMMARY` is)."""
    adapter = Path(adapter)
    return adapter.parent.parent if adapter.parent.name == CHECKPOINTS else adapter


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
    """Forwards each optimizer step's log (loss, learning rate, ...) to a plain function.
    It runs on the training thread: the function must be safe to call from there."""

    def __init__(self, report: ProgressCallback) -> None:
        self.report = report

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            numbers = {key: float(value) for key, value in logs.items() if _number(value)}
            self.report(state.global_step, state.max_steps, numbers)
