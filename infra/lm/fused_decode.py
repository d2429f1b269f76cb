"""The engine's forward pass of a Llama-family model: prompt prefills and decode steps.

On a 2-core CPU a decode step is bound by streaming the weights from memory plus a fixed
cost per op. transformers runs 7 projections per layer and ~1,000 small ops per step;
here q/k/v are one matmul and gate/up another (4 per layer), all on weights packed once
for oneDNN (`packed_linear`), and nothing else is computed. A prefill puts every prompt's
tokens through the same products as one block of rows, with no padding, and attends per
prompt in fixed chunks (`attention`); a step attends over the KV slab. The rotary tables
come from the model's own module; in float32 the logits equal transformers' forward up to
summation order (tests/test_lm_fused_decode.py).

A LoRA adapter is served as its own set of weights, the base merged with the adapter's
delta (peft computes it), so it runs the same fused, packed products as the base model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from infra.lm.attention import DECODE_KERNELS, DecodeAttention, chunks, prompt_chunk
from infra.lm.kv_slab import KVSlab, Layers
from infra.lm.packed_linear import PackedLinear
from infra.lm.row_plan import RowPlan

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")
Deltas = dict[str, torch.Tensor]  # module name ("model.layers.3.self_attn.q_proj") -> delta W


@dataclass(frozen=True)
class _Layer:
    input_norm: torch.Tensor  # RMSNorm weights
    qkv: PackedLinear  # [q + k + v out, hidden], q rows pre-scaled by head_dim ** -0.5
    o: PackedLinear
    post_norm: torch.Tensor
    gate_up: PackedLinear  # [2 * intermediate, hidden]
    down: PackedLinear

    def linears(self) -> tuple[PackedLinear, ...]:
        return (self.qkv, self.o, self.gate_up, self.down)


@dataclass(frozen=True)
class Weights:
    """The model's weights as the engine runs them: the base model's, or an adapter's."""

    layers: list[_Layer]
    head: PackedLinear
    head_delta: torch.Tensor | None = None  # an adapter's change to lm_head, if any

    def use(self, plan_for: Callable[[PackedLinear], RowPlan]) -> None:
        """Group every product's rows as `plan_for` says (see `invariance`)."""
        for linear in [self.head, *(lin for layer in self.layers for lin in layer.linears())]:
            linear.plan = plan_for(linear)


@dataclass
class Prompt:
    """Tokens to prefill: `ids` at positions start.., after `prefix` (the K/V of positions
    0..start-1 per layer, [kv_heads, start, dim]); `outputs` indexes the `ids` whose final
    hidden state comes back."""

    ids: list[int]
    start: int = 0
    prefix: Layers | None = None
    outputs: list[int] = field(default_factory=lambda: [-1])


def _name(layer: int, projection: str) -> str:
    """The module's name in the model (and in a peft adapter's deltas)."""
    part = "self_attn" if projection in ATTENTION else "mlp"
    return f"model.layers.{layer}.{part}.{projection}"


def is_supported(model: PreTrainedModel) -> bool:
    cfg = model.config
    return (
        cfg.model_type == "llama"
        and not getattr(cfg, "attention_bias", False)
        and not getattr(cfg, "mlp_bias", False)
        and cfg.hidden_act == "silu"
    )


class FusedDecoder:
    """`prefill(prompts, weights)` and `step(...)` of a Llama-family model."""

    def __init__(self, model: PreTrainedModel):
        if not is_supported(model):
            raise ValueError(f"no fused forward for model type {model.config.model_type!r}")
        cfg = model.config
        self.model = model
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.embed = model.model.embed_tokens
        self.rotary = model.model.rotary_emb
        self.norm = model.model.norm.weight
        self.attention: DecodeAttention = DECODE_KERNELS["one-shot"]
        self.base = self.weights()

    def use_attention(self, kernel: str) -> None:
        """The decode attention kernel (`attention.DECODE_KERNELS`) that `invariance` chose."""
        self.attention = DECODE_KERNELS[kernel]

    def weights(self, deltas: Deltas | None = None) -> Weights:
        """The packed weights of the base model, plus `deltas` where given."""
        deltas = deltas or {}
        layers_n = len(self.model.model.layers)
        known = {_name(i, p) for i in range(layers_n) for p in ATTENTION + MLP} | {"lm_head"}
        if set(deltas) - known:
            raise ValueError(
                f"an adapter changes modules the engine cannot merge: {sorted(set(deltas) - known)}"
            )

        def weight(name: str, module: torch.nn.Module) -> torch.Tensor:
            w = getattr(module, "base_layer", module).weight.detach()  # under peft or not
            delta = deltas.get(name)
            return w if delta is None else (w.float() + delta.float()).to(w.dtype)

        layers = []
        q_size = self.heads * self.head_dim
        with torch.no_grad():
            for i, layer in enumerate(self.model.model.layers):
                w = {p: weight(_name(i, p), getattr(layer.self_attn, p)) for p in ATTENTION} | {
                    p: weight(_name(i, p), getattr(layer.mlp, p)) for p in MLP
                }
                qkv = torch.cat([w["q_proj"], w["k_proj"], w["v_proj"]])
                # rotary embeddings are linear, so the attention scale can live in q's
                # weights (exact for head_dim 64: the scale is 1/8)
                qkv[:q_size] *= self.head_dim**-0.5
                layers.append(
                    _Layer(
                        input_norm=layer.input_layernorm.weight,
                        qkv=PackedLinear(qkv),
                        o=PackedLinear(w["o_proj"]),
                        post_norm=layer.post_attention_layernorm.weight,
                        gate_up=PackedLinear(torch.cat([w["gate_proj"], w["up_proj"]])),
                        down=PackedLinear(w["down_proj"]),
                    )
                )
            head = PackedLinear(weight("lm_head", self.model.lm_head))
        return Weights(layers, head, deltas.get("lm_head"))

    def step(self, ids: torch.Tensor, slab: KVSlab, weights: Weights) -> torch.Tensor:
        """One token per slab row, ids [rows] -> next-token logits [rows, vocab].

        Every op here runs 30 times a step, and on 2 cores each costs ~5-15 us however
        small: so one additive mask per step, q and k rotated together, residual adds in
        place, and norms through one fused kernel.
        """
        positions, bias = slab.step_inputs()
        rows, group = ids.shape[0], self.heads // self.kv_heads

        def attend(index: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            keys, values = slab.write(index, k, v)
            q = q.view(rows, self.kv_heads, group, self.head_dim)
            return self.attention(q, keys, values, bias, slab.lengths[:rows] + 1).view(rows, -1)

        x = self._layers(self.embed(ids), positions, attend, weights)
        slab.advance()
        return weights.head(F.rms_norm(x, x.shape[-1:], self.norm, self.eps))

    def prefill(self, prompts: list[Prompt], weights: Weights) -> tuple[torch.Tensor, list[Layers]]:
        """All prompts' tokens in one pass, unpadded.

        Returns the final (normed) hidden state of each prompt's `outputs`, in order
        [outputs, hidden], and each prompt's K/V per layer [kv_heads, start + len, dim].
        """
        ids = torch.tensor([t for p in prompts for t in p.ids])
        positions = torch.cat([torch.arange(p.start, p.start + len(p.ids)) for p in prompts])
        offsets = [0]
        for p in prompts:
            offsets.append(offsets[-1] + len(p.ids))
        kv: list[Layers] = [[] for _ in prompts]

        def attend(index: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
            out = torch.empty_like(q)  # [tokens, heads, dim]
            for p, at, own in zip(prompts, offsets, kv, strict=False):
                keys, values = k[at : at + len(p.ids)].transpose(0, 1), v[at : at + len(p.ids)]
                values = values.transpose(0, 1)
                if p.prefix:
                    keys = torch.cat([p.prefix[index][0], keys], 1)
                    values = torch.cat([p.prefix[index][1], values], 1)
                keys, values = keys.contiguous(), values.contiguous()
                own.append((keys, values))
                for lo, hi in chunks(p.start, p.start + len(p.ids)):
                    rows = slice(at + lo - p.start, at + hi - p.start)
                    out[rows] = prompt_chunk(q[rows], keys[:, :hi], values[:, :hi], lo)
            return out.view(q.shape[0], -1)

        x = self._layers(self.embed(ids), positions[:, None], attend, weights)
        picked = [
            at + (o % len(p.ids))
            for p, at in zip(prompts, offsets, strict=False)
            for o in p.outputs
        ]
        last = x[picked]
        return F.rms_norm(last, last.shape[-1:], self.norm, self.eps), kv

    def _layers(self, x: torch.Tensor, positions: torch.Tensor, attend, weights: Weights):
        """x [tokens, hidden] and positions [tokens, 1] through every layer.

        `attend(layer, q, k, v)` gets the rotated q [tokens, heads, dim] (already scaled),
        k [tokens, kv_heads, dim] and v, and returns the attention output [tokens, hidden].
        """
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        cos, sin = self.rotary(x, positions)  # [tokens, 1, dim]
        # rotate_half(t) * sin == t.roll(dim / 2) * (sin with its first half negated)
        sin = torch.cat([-sin[..., : dim // 2], sin[..., dim // 2 :]], -1)
        width = x.shape[-1:]
        for index, layer in enumerate(weights.layers):
            h = F.rms_norm(x, width, layer.input_norm, self.eps)
            qkv = layer.qkv(h).view(x.shape[0], heads + 2 * kv_heads, dim)
            qk = qkv[:, : heads + kv_heads]
            qk = torch.addcmul(qk * cos, qk.roll(dim // 2, -1), sin)
            attn = attend(index, qk[:, :heads], qk[:, heads:], qkv[:, heads + kv_heads :])
            x = layer.o(attn).add_(x)
            gate, up = layer.gate_up(F.rms_norm(x, width, layer.post_norm, self.eps)).chunk(2, -1)
            x = layer.down(F.silu(gate).mul_(up)).add_(x)
        return x
