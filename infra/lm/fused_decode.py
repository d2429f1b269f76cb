"""One decode step of a Llama-family model, with fused projections, for the batcher.

On a 2-core CPU a decode step is bound by streaming the weights from memory plus a fixed
cost per op. transformers runs 7 projections per layer and ~1,000 small ops per step;
here q/k/v are one matmul and gate/up another (4 per layer), the attention is grouped
per K/V head on the slab (as in `decode_attention`), and nothing else is computed. The
rotary tables come from the model's own module; in float32 the logits equal transformers'
forward up to summation order (tests/test_lm_fused_decode.py).

Only the base weights are fused: while a peft adapter is active the batcher uses the
model's own forward, whose LoRA layers this step would skip.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from infra.lm.kv_slab import KVSlab


@dataclass(frozen=True)
class _Layer:
    input_norm: torch.Tensor  # RMSNorm weights
    qkv: torch.Tensor  # [q + k + v out, hidden], q rows pre-scaled by head_dim ** -0.5
    o: torch.Tensor
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # [2 * intermediate, hidden]
    down: torch.Tensor


class FusedDecoder:
    """`step(...)` gives the next-token logits of every slab row; `for_model` or None."""

    @staticmethod
    def for_model(model: PreTrainedModel) -> FusedDecoder | None:
        cfg = model.config
        plain = (
            cfg.model_type == "llama"
            and not getattr(cfg, "attention_bias", False)
            and not getattr(cfg, "mlp_bias", False)
            and cfg.hidden_act == "silu"
        )
        return FusedDecoder(model) if plain else None

    def __init__(self, model: PreTrainedModel):
        cfg = model.config
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.embed = model.model.embed_tokens
        self.rotary = model.model.rotary_emb
        self.norm = model.model.norm.weight
        self.head = model.lm_head
        self.layers = []
        q_size = self.heads * self.head_dim
        with torch.no_grad():
            for layer in model.model.layers:
                attn, mlp = layer.self_attn, layer.mlp
                # built when the batcher starts, before any peft adapter wraps these
                qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
                # rotary embeddings are linear, so the attention scale can live in q's
                # weights (exact in bf16 for head_dim 64: the scale is 1/8)
                qkv[:q_size] *= self.head_dim**-0.5
                gate_up = [mlp.gate_proj.weight, mlp.up_proj.weight]
                self.layers.append(
                    _Layer(
                        input_norm=layer.input_layernorm.weight,
                        qkv=qkv.contiguous(),
                        o=attn.o_proj.weight,
                        post_norm=layer.post_attention_layernorm.weight,
                        gate_up=torch.cat(gate_up).contiguous(),
                        down=mlp.down_proj.weight,
                    )
                )

    def step(
        self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, slab: KVSlab
    ) -> torch.Tensor:
        """ids and positions [rows, 1], mask [rows, 1, 1, cols] -> logits [rows, vocab].

        Every op here runs 30 times a step, and on 2 cores each costs ~5-15 us however
        small: so one additive mask per step, q and k rotated together, residual adds
        folded into addmm, and norms through one fused kernel.
        """
        rows, heads, kv_heads, dim = ids.shape[0], self.heads, self.kv_heads, self.head_dim
        x = self.embed(ids)[:, 0]  # [rows, hidden]
        cos, sin = self.rotary(x, positions)  # [rows, 1, dim]
        # rotate_half(t) * sin == t.roll(dim / 2) * (sin with its first half negated)
        sin = torch.cat([-sin[..., : dim // 2], sin[..., dim // 2 :]], -1)
        bias = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))
        width = (x.shape[-1],)
        for index, layer in enumerate(self.layers):
            h = F.rms_norm(x, width, layer.input_norm, self.eps)
            qkv = F.linear(h, layer.qkv).view(rows, heads + 2 * kv_heads, dim)
            qk = qkv[:, : heads + kv_heads]
            qk = torch.addcmul(qk * cos, qk.roll(dim // 2, -1), sin)
            k, v = qk[:, heads:, None], qkv[:, heads + kv_heads :, None]
            keys, values = slab.update(k, v, index)
            attn = _grouped_attention(qk[:, :heads], keys, values, bias)
            x = torch.addmm(x, attn.reshape(rows, heads * dim), layer.o.t())
            gate, up = F.linear(
                F.rms_norm(x, width, layer.post_norm, self.eps), layer.gate_up
            ).chunk(2, -1)
            x = torch.addmm(x, F.silu(gate).mul_(up), layer.down.t())
        return self.head(F.rms_norm(x, width, self.norm, self.eps))


def _grouped_attention(
    query: torch.Tensor,  # [rows, heads, dim], already scaled
    key: torch.Tensor,  # [rows, kv_heads, cols, dim]
    value: torch.Tensor,
    bias: torch.Tensor,  # [rows, 1, 1, cols]: 0 or -inf
) -> torch.Tensor:
    """grouped_decode_attention with the scale in q and the mask as one additive bias."""
    rows, heads, dim = query.shape
    kv_heads = key.shape[1]
    grouped = query.reshape(rows, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(key, grouped.transpose(-1, -2)).transpose(-1, -2)
    weights = torch.softmax(scores.float() + bias, -1).to(value.dtype)
    return torch.matmul(weights, value)
