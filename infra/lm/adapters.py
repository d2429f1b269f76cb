"""A saved LoRA adapter as the weight deltas the engine merges into its own weights.

peft computes each adapted module's delta (rank, alpha, rank-stabilized scaling,
fan-in/fan-out layout); the model is wrapped only while the deltas are read and then
unwrapped, so `LocalLM.model` stays the plain base model.
"""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel

from infra.lm.fused_decode import Deltas

_LOADING = "flywheel_loading"


def lora_deltas(model: PreTrainedModel, path: str | Path) -> Deltas:
    """Module name -> delta W of the LoRA adapter saved at `path` (peft's format)."""
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    wrapped = PeftModel.from_pretrained(model, str(path), adapter_name=_LOADING)
    try:
        if getattr(wrapped.peft_config[_LOADING], "use_dora", False):
            raise ValueError(f"{path}: DoRA adapters cannot be merged into the local engine")
        embedded = [
            name
            for name, module in wrapped.base_model.model.named_modules()
            if _LOADING in getattr(module, "lora_embedding_A", {})
        ]
        if embedded:
            raise ValueError(f"{path}: LoRA on embeddings ({embedded}) cannot be merged")
        return {
            name: module.get_delta_weight(_LOADING).detach()
            for name, module in wrapped.base_model.model.named_modules()
            if isinstance(module, LoraLayer) and _LOADING in module.lora_A
        }
    finally:
        wrapped.unload()
