"""Decode steps and prompt prefills of a Llama-family model, with fused projections.

On a 2-core CPU a decode step is bound by streaming the weights from memory plus a fixed
cost per op. transformers runs 7 projections per layer and ~1,000 small ops per step;
here q/k/v are one matmul and gate/up another (4 per layer), all on weights packed once
for oneDNN (`packed_linear`), a step's attention is grouped per K/V head on the slab (as
in `decode_attention`), and nothing else is computed. Prefills run the same layers with
torch's SDPA over each prompt. The rotary tables come from the model's own module; in
float32 the logits equal transformers' forward up to summation order
(tests/test_lm_fused_decode.py).

Only the base weights are fused: while a peft adapter is active the batcher uses the
model's own forward, whose LoRA layers these would skip.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from infra.lm.kv_slab import KVSlab
from infra.lm.packed_linear import PackedLinear
from infra.lm.prefix import Layers


@dataclass(frozen=True)
class _Layer:
    input_norm: torch.Tensor  # RMSNorm weights
    qkv: PackedLinear  # [q + k + v out, hidden], q rows pre-scaled by head_dim ** -0.5
    o: PackedLinear
    post_norm: torch.Tensor
    gate_up: PackedLinear  # [2 * intermediate, hidden]
    down: PackedLinear


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
        self.head = PackedLinear(model.lm_head.weight)
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
                        qkv=PackedLinear(qkv),
                        o=PackedLinear(attn.o_proj.weight),
                        post_norm=layer.post_attention_layernorm.weight,
                        gate_up=PackedLinear(torch.cat(gate_up)),
                        down=PackedLinear(mlp.down_proj.weight),
                    )
                )

    def step(
        self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, slab: KVSlab
    ) -> torch.Tensor:
        """ids and positions [rows, 1], mask [rows, 1, 1, cols] -> logits [rows, vocab].

        Every op here runs 30 times a step, and on 2 cores each costs ~5-15 us however
        small: so one additive mask per step, q and k rotated together, residual adds in
        place, and norms through one fused kernel.
        """
        rows = ids.shape[0]
        bias = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))

        def attend(index: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            keys, values = slab.update(k[:, :, None], v[:, :, None], index)
            return _grouped_attention(q, keys, values, bias).reshape(rows, -1)

        x = self._layers(self.embed(ids)[:, 0], positions, attend)
        return self.head(F.rms_norm(x, x.shape[-1:], self.norm, self.eps))

    def prefill(
        self, suffixes: list[list[int]], prefix: Layers | None, pad_id: int
    ) -> tuple[torch.Tensor, Layers, torch.Tensor]:
        """`forward_suffixes` on these weights: left-padded suffixes after a shared prefix.

        Returns the logits of each suffix's last token [rows, vocab], the K/V per layer
        [rows, kv_heads, prefix + width, dim] and which of those columns are valid.
        """
        g, width = len(suffixes), max(map(len, suffixes))
        shared = prefix[0][0].shape[2] if prefix else 0
        ids = torch.tensor([[pad_id] * (width - len(s)) + s for s in suffixes])
        own = torch.arange(width) >= torch.tensor([width - len(s) for s in suffixes])[:, None]
        valid = torch.cat([torch.ones(g, shared, dtype=torch.bool), own], 1)
        positions = shared + (own.long().cumsum(-1) - 1).clamp(min=0)
        # causal over the valid columns; a padding query sees itself, so no row is empty
        # (its output is never used, and slab.append zeroes its K/V)
        query_col = shared + torch.arange(width)[:, None]
        causal = torch.arange(shared + width) <= query_col
        mask = (causal & valid[:, None]) | (torch.arange(shared + width) == query_col)
        layers: Layers = []

        def attend(index: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            q, k, v = (t.view(g, width, -1, t.shape[-1]).transpose(1, 2) for t in (q, k, v))
            if prefix:
                k = torch.cat([prefix[index][0].expand(g, -1, -1, -1), k], 2)
                v = torch.cat([prefix[index][1].expand(g, -1, -1, -1), v], 2)
            layers.append((k, v))
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask[:, None], scale=1.0, enable_gqa=True
            )
            return out.transpose(1, 2).reshape(g * width, -1)

        x = self._layers(self.embed(ids).view(g * width, -1), positions.view(-1, 1), attend)
        last = x.view(g, width, -1)[:, -1]
        return self.head(F.rms_norm(last, last.shape[-1:], self.norm, self.eps)), layers, valid

    def _layers(self, x: torch.Tensor, positions: torch.Tensor, attend) -> torch.Tensor:
        """x [tokens, hidden] and positions [tokens, 1] through every layer.

        `attend(layer, q, k, v)` gets the rotated q [tokens, heads, dim] (already scaled),
        k [tokens, kv_heads, dim] and v, and returns the attention output [tokens, hidden].
        """
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        cos, sin = self.rotary(x, positions)  # [tokens, 1, dim]
        # rotate_half(t) * sin == t.roll(dim / 2) * (sin with its first half negated)
        sin = torch.cat([-sin[..., : dim // 2], sin[..., dim // 2 :]], -1)
        width = x.shape[-1:]
        for index, layer in enumerate(self.layers):
            h = F.rms_norm(x, width, layer.input_norm, self.eps)
            qkv = layer.qkv(h).view(x.shape[0], heads + 2 * kv_heads, dim)
            qk = qkv[:, : heads + kv_heads]
            qk = torch.addcmul(qk * cos, qk.roll(dim // 2, -1), sin)
            attn = attend(index, qk[:, :heads], qk[:, heads:], qkv[:, heads + kv_heads :])
            x = layer.o(attn).add_(x)
            gate, up = layer.gate_up(F.rms_norm(x, width, layer.post_norm, self.eps)).chunk(2, -1)
            x = layer.down(F.silu(gate).mul_(up)).add_(x)
        return x


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
