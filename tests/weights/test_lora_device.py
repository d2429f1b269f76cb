"""Where a LoRA run trains is chosen when it starts, from `lora.device` and what torch
sees; these check the choice alone, with CUDA's presence pretended either way."""

import importlib.util

import pytest
import torch

from infra.settings import JudgeLoraSettings, LoraSettings
from weights.lora import (
    Placement,
    base_precision,
    run_length,
    training_arguments,
    training_placement,
)


@pytest.fixture
def gpu(monkeypatch):
    """A machine with one bf16-capable CUDA GPU, as far as the choice can tell."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA H100")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def bitsandbytes(monkeypatch, installed: bool) -> None:
    """Pretend bitsandbytes is importable, or not, whatever this environment holds."""
    find_spec = importlib.util.find_spec

    def pretended(name, *args):
        if name == "bitsandbytes":
            return object() if installed else None
        return find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", pretended)


def test_auto_takes_the_gpu_in_bf16_where_there_is_one(gpu):
    placement = training_placement(LoraSettings())
    assert placement == Placement("cuda", bf16=True)
    assert placement.describe() == "cuda:0 (NVIDIA H100, bf16)"


def test_a_gpu_without_bf16_trains_in_float32(gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert training_placement(LoraSettings()).dtype == torch.float32


def test_auto_without_a_gpu_is_the_cpu_as_before(no_gpu):
    placement = training_placement(LoraSettings())
    assert placement == Placement("cpu", base_precision()[0])
    assert Placement("cpu", False).describe() == "cpu (float32)"


def test_cpu_stays_on_the_cpu_beside_a_gpu(gpu):
    assert training_placement(LoraSettings(device="cpu"), bf16=False).device == "cpu"


def test_cuda_without_a_gpu_is_a_sentence(no_gpu):
    with pytest.raises(ValueError, match="lora.device is 'cuda' but torch sees no CUDA device"):
        training_placement(LoraSettings(device="cuda"))


def test_4bit_needs_a_gpu(no_gpu, monkeypatch):
    bitsandbytes(monkeypatch, installed=True)
    with pytest.raises(ValueError, match="'4bit' needs a CUDA device, but torch sees no CUDA"):
        training_placement(LoraSettings(quantize="4bit"))


def test_4bit_on_the_cpu_says_the_setting_is_why(gpu, monkeypatch):
    bitsandbytes(monkeypatch, installed=True)
    with pytest.raises(ValueError, match="needs a CUDA device, but lora.device is 'cpu'"):
        training_placement(LoraSettings(device="cpu", quantize="4bit"))


def test_4bit_needs_bitsandbytes(gpu, monkeypatch):
    bitsandbytes(monkeypatch, installed=False)
    with pytest.raises(ValueError, match="'4bit' needs the bitsandbytes package"):
        training_placement(LoraSettings(quantize="4bit"))


def test_4bit_with_both_is_reported(gpu, monkeypatch):
    bitsandbytes(monkeypatch, installed=True)
    placement = training_placement(LoraSettings(quantize="4bit"))
    assert placement == Placement("cuda", True, four_bit=True)
    assert placement.describe() == "cuda:0 (NVIDIA H100, 4-bit nf4 base, bf16)"


def test_a_gpu_run_recomputes_activations_and_a_cpu_run_leaves_it_to_the_method():
    cfg = LoraSettings()
    on_gpu = training_arguments("/tmp/x", cfg, Placement("cuda", True), 0, 16)
    on_cpu = training_arguments("/tmp/x", cfg, Placement("cpu", False), 0, 16)
    assert (on_gpu["use_cpu"], on_gpu["activation_checkpointing"], on_gpu["bf16"]) == (
        False,
        True,
        True,
    )
    assert on_cpu["use_cpu"] and "activation_checkpointing" not in on_cpu
    sft_on_cpu = {"activation_checkpointing": False}  # what train_sft_adapter asks
    assert (sft_on_cpu | on_gpu)["activation_checkpointing"] is True
    assert (sft_on_cpu | on_cpu)["activation_checkpointing"] is False


def test_the_judge_s_lora_trains_where_its_settings_say():
    cfg = JudgeLoraSettings(device="cpu", quantize="4bit").training()
    assert (cfg.device, cfg.quantize) == ("cpu", "4bit")


def test_max_steps_caps_a_long_run_and_never_repeats_a_short_one():
    """trl's max_steps overrides the epochs; the night's is a cap: 295 records at 8 a step
    are 37 steps, cut to 20; 40 records are 5 steps, not 20 of them going round again."""
    capped = LoraSettings(max_steps=20, batch_size=8)
    assert run_length(capped, 295) == 20
    assert run_length(capped, 40) == -1 and run_length(capped, 160) == -1
    assert run_length(capped.model_copy(update={"epochs": 5}), 40) == 20
    assert run_length(LoraSettings(max_steps=None), 295) == -1
    grpo = LoraSettings(max_steps=20, method="grpo", batch_size=8)
    assert run_length(grpo, 4) == 20  # online RL: its steps sample anew
