"""One decode step of a Llama-family model, with fused projections, for the batcher.

On a 2-core CPU a decode step is bound by streaming the weights from memory plus a fixed
cost per op. transformers runs 7 projections per layer and ~1,000 small ops per step;
here q/k/v are one matmul and gate/up another (4 per layer), the attention is
`grouped_decode_attention` on the slab, and nothing else is computed. Norms and rotary
embeddings are the model's own modules, so the numerics are transformers' own (equal to
its forward in float32; see tests/test_lm_fused_decode.py).

Only the base weights are fused: while a peft adapter is active the batcher uses the
model's own forward, whose LoRA layers this step would skip.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from infra.lm.decode_attention import grouped_decode_attention
from infra.lm.kv_slab import KVSlab


@dataclass(frozen=True)
class _Layer:
    input_norm: torch.nn.Module
    qkv: torch.Tensor  # [q + k + v out, hidden]
    o: torch.Tensor
    post_norm: torch.nn.Module
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
        self.scaling = self.head_dim**-0.5
        self.embed = model.model.embed_tokens
        self.rotary = model.model.rotary_emb
        self.norm = model.model.norm
        self.head = model.lm_head
        self.layers = []
        with torch.no_grad():
            for layer in model.model.layers:
                attn, mlp = layer.self_attn, layer.mlp
                # built when the batcher starts, before any peft adapter wraps these
                qkv = [attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]
                gate_up = [mlp.gate_proj.weight, mlp.up_proj.weight]
                self.layers.append(
                    _Layer(
                        input_norm=layer.input_layernorm,
                        qkv=torch.cat(qkv).contiguous(),
                        o=attn.o_proj.weight,
                        post_norm=layer.post_attention_layernorm,
                        gate_up=torch.cat(gate_up).contiguous(),
                        down=mlp.down_proj.weight,
                    )
                )

    def step(
        self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, slab: KVSlab
    ) -> torch.Tensor:
        """ids and positions [rows, 1], mask [rows, 1, 1, cols] -> logits [rows, vocab]."""
        rows = ids.shape[0]
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        x = self.embed(ids)
        cos, sin = self.rotary(x, positions)
        for index, layer in enumerate(self.layers):
            h = layer.input_norm(x)
            q, k, v = F.linear(h, layer.qkv).split([q_size, kv_size, kv_size], -1)
            q = q.view(rows, 1, self.heads, self.head_dim).transpose(1, 2)
            k = k.view(rows, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            v = v.view(rows, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            keys, values = slab.update(k, v, index)
            attn = grouped_decode_attention(q, keys, values, mask, self.scaling)
            x = x + F.linear(attn.reshape(rows, 1, q_size), layer.o)
            gate, up = F.linear(layer.post_norm(x), layer.gate_up).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, layer.down)
        return self.head(self.norm(x))[:, -1]
