"""A saved LoRA adapter as the weight deltas the engine merges into its own weights.

peft computes each adapted module's delta (rank, alpha, rank-stabilized scaling,
fan-in/fan-out layout). It wraps a shell of the model, never the model: the shell has
the model's modules, with each Linear weight a single element expanded to its shape, so
peft sees the shapes, dtype and device it reads and nothing is copied. The engine has
released the model's own Linear weights by then (`fused_decode`), which peft could not
wrap. Only weight deltas merge: an adapter that also trains biases or whole modules
would be served as something else than what was trained, so it is refused.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from infra.lm.engine.fused_decode import Deltas

_LOADING = "flywheel_loading"


def lora_deltas(model: PreTrainedModel, path: str | Path) -> Deltas:
    """Module name -> delta W of the LoRA adapter saved at `path` (peft's format)."""
    from peft import PeftConfig, PeftModel
    from peft.tuners.lora import LoraLayer

    problem = _unmergeable(PeftConfig.from_pretrained(str(path)))
    if problem is not None:
        raise ValueError(f"{path}: {problem} cannot be merged into the local engine")
    wrapped = PeftModel.from_pretrained(_shell(model), str(path), adapter_name=_LOADING)
    modules = dict(wrapped.base_model.model.named_modules())
    embedded = [
        name for name, m in modules.items() if _LOADING in getattr(m, "lora_embedding_A", {})
    ]
    if embedded:
        raise ValueError(f"{path}: LoRA on embeddings ({embedded}) cannot be merged")
    return {
        name: module.get_delta_weight(_LOADING).detach()
        for name, module in modules.items()
        if isinstance(module, LoraLayer) and _LOADING in module.lora_A
    }


def _unmergeable(config) -> str | None:
    if config.peft_type != "LORA":
        return f"a {config.peft_type} adapter (not LoRA)"
    if getattr(config, "use_dora", False):
        return "a DoRA adapter"
    if getattr(config, "bias", "none") != "none" or getattr(config, "lora_bias", False):
        return "an adapter that trains biases"
    if getattr(config, "modules_to_save", None):
        return f"an adapter that trains whole modules ({config.modules_to_save})"
    return None


def _shell(model: PreTrainedModel) -> PreTrainedModel:
    with torch.device("meta"):
        shell = AutoModelForCausalLM.from_config(model.config, dtype=model.dtype)
    for module in shell.modules():
        if isinstance(module, torch.nn.Linear):
            placeholder = torch.zeros((), dtype=model.dtype).expand(module.weight.shape)
            module.weight = torch.nn.Parameter(placeholder, requires_grad=False)
    return shell
