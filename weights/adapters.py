"""Adapter folders on disk: is one whole, and load it over the base model."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def adapter_files_ok(path: str | Path) -> bool:
    """Whether `path` holds a readable peft adapter config and non-empty weights."""
    path = Path(path)
    weights = path / ADAPTER_WEIGHTS
    try:
        config = json.loads((path / ADAPTER_CONFIG).read_text())
    except (OSError, ValueError):
        return False
    return "peft_type" in config and weights.is_file() and weights.stat().st_size > 0


def load_for_inference(
    base_model_path: str | Path, adapter_path: str | Path, dtype: torch.dtype = torch.float32
) -> PeftModel:
    """The base model with the adapter applied (not merged), in eval mode."""
    if not adapter_files_ok(adapter_path):
        raise FileNotFoundError(
            f"{adapter_path} is not a whole adapter: "
            f"it needs {ADAPTER_CONFIG} and {ADAPTER_WEIGHTS}"
        )
    base = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=dtype)
    return PeftModel.from_pretrained(base, str(adapter_path)).eval()
