"""Which checkpoints the engine's fused forward runs, and one sentence for the others.

The fused forward (`fused_decode`) is the Llama decoder: RMSNorm, rotary attention over
grouped K/V heads, a SiLU-gated MLP, no biases. Qwen2 is the same decoder plus biases on
the q/k/v projections (o_proj has none), and an optional sliding window, which the
engine does not run: it attends over the whole context, so a checkpoint whose window is
shorter than its context would get other numbers than its own forward on long prompts.
"""

from __future__ import annotations

from transformers import PretrainedConfig

from infra.errors import UserFacingError

QKV_BIAS = {"llama": False, "qwen2": True}  # model_type -> q/k/v projections have biases
SUPPORTED = (
    "Llama-architecture checkpoints (model_type 'llama', no biases, SiLU) and Qwen2 "
    "(model_type 'qwen2', without a sliding window)"
)


class UnsupportedModelError(UserFacingError):
    """The checkpoint's architecture has no fused forward in the local engine."""


def check_supported(config: PretrainedConfig, name: str) -> None:
    """Raise `UnsupportedModelError` naming `name` (its path) unless the engine runs it."""
    problem = _problem(config)
    if problem is not None:
        raise UnsupportedModelError(
            f"{name} is {problem}; the local engine runs {SUPPORTED}. Serve it with vLLM "
            "and set lm.backend = 'openai'."
        )


def has_qkv_bias(config: PretrainedConfig) -> bool:
    return QKV_BIAS[config.model_type]


def _problem(config: PretrainedConfig) -> str | None:
    kind = config.model_type
    if kind not in QKV_BIAS:
        return f"a {kind!r} model"
    if config.hidden_act != "silu":
        return f"a {kind!r} model with {config.hidden_act!r} activations"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return f"a {kind!r} model with biases on its output and MLP projections"
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None) or []
    sliding = [i for i, layer in enumerate(layer_types) if layer == "sliding_attention"]
    if sliding and window is not None and window < config.max_position_embeddings:
        return (
            f"a {kind!r} model whose layers {sliding[0]}-{sliding[-1]} attend only to the "
            f"last {window} of its {config.max_position_embeddings} positions "
            "(use_sliding_window)"
        )
    return None
