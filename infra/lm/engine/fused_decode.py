"""The engine's forward pass of a Llama-family model: prompt prefills and decode steps.

On a 2-core CPU a decode step is bound by streaming the weights from memory plus a fixed
cost per op. transformers runs 7 projections per layer and ~1,000 small ops per step;
here q/k/v are one matmul and gate/up another (4 per layer), all on weights packed once
for oneDNN (`packed_linear`), and nothing else is computed. A prefill puts every prompt's
tokens through the same products as one block of rows, with no padding, and attends per
prompt in fixed chunks (`attention`), always on all the engine's threads: PyTorch's CPU
attention picks its path by the thread count, so a 1- or 3-query chunk (a prompt 64k + 1
or + 3 tokens long) got other log-probabilities on one thread (AMD EPYC, AVX2, fp32), and
the governor drops to one thread while other processes hold the cores. A step attends
over the KV slab. The rotary tables
come from the model's own module; in float32 the logits equal transformers' forward up to
summation order (tests/infra/lm/engine/: test_fused_decode.py, test_qwen2.py). Qwen2's
q/k/v biases ride in the q/k/v product (`architectures` says which checkpoints run).

A LoRA adapter is served as its own set of weights, the base merged with the adapter's
delta (peft computes it), so it runs the same fused, packed products as the base model;
the products no delta touches are the base's own, not copies.

Given the checkpoint's files (`checkpoint_weights`), the weights the engine copies are read
from them and the model's Linear weights released as each layer is packed, so the process
holds one copy of the body (and never two at once); an adapter's base weights are read
from the files too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from infra.lm.engine.architectures import check_supported, has_qkv_bias
from infra.lm.engine.attention import DECODE_KERNELS, DecodeAttention, chunks, prompt_chunk
from infra.lm.engine.checkpoint_weights import CheckpointWeights
from infra.lm.engine.kv_slab import KVSlab, Layers
from infra.lm.engine.packed_linear import PackedLinear, packs
from infra.lm.engine.row_plan import RowPlan
from infra.lm.engine.score_head import ScoreHead
from infra.lm.engine.thread_governor import at_threads

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
QKV = ATTENTION[:3]
MLP = ("gate_proj", "up_proj", "down_proj")
Deltas = dict[str, torch.Tensor]  # module name ("model.layers.3.self_attn.q_proj") -> delta W


@dataclass(frozen=True)
class _Layer:
    input_norm: torch.Tensor  # RMSNorm weights
    qkv: PackedLinear  # [q + k + v out, hidden] (+ bias), q rows pre-scaled by head_dim ** -0.5
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
    scores: PackedLinear | ScoreHead  # float32 logits for choice scoring (`score_head`)

    def use(self, plan_for: Callable[[PackedLinear | ScoreHead], RowPlan]) -> None:
        """Group every product's rows as `plan_for` says (see `invariance`)."""
        for product in [self.head, self.scores, *(p for x in self.layers for p in x.linears())]:
            product.plan = plan_for(product)


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


class FusedDecoder:
    """`prefill(prompts, weights)` and `step(...)` of a Llama-family model.

    With `checkpoint` (the files the model was loaded from), the model's Linear weights
    are released once packed; without, the model keeps them (tests compare against it).
    """

    def __init__(self, model: PreTrainedModel, checkpoint: CheckpointWeights | None = None):
        cfg = model.config
        check_supported(cfg, cfg.name_or_path or "this model")
        self.model, self.checkpoint = model, checkpoint
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.qkv_bias = has_qkv_bias(cfg)
        self.dtype = model.dtype
        self.packs = packs(self.dtype)  # else weights are used as they are, not copied
        self.eps = cfg.rms_norm_eps
        self.embed = model.model.embed_tokens
        self.rotary = model.model.rotary_emb
        self.norm = model.model.norm.weight
        self.attention: DecodeAttention = DECODE_KERNELS["one-shot"]
        # a prompt's attention runs on these threads whatever the governor set (see above)
        self.prompt_threads = torch.get_num_threads()
        self._base: Weights | None = self._pack({}, base=None)

    @property
    def base(self) -> Weights:
        """The base model's packed weights, packed again after `rest`."""
        if self._base is None:
            self._base = self._pack({}, base=None)
        return self._base

    def rest(self) -> None:
        """Let go of the packed base weights (the bulk of the engine's memory); the next
        use of `base` packs them again, from the checkpoint's files where there are some
        (the model's own copies were released when first packed), else from the model."""
        self._base = None

    def use_attention(self, kernel: str) -> None:
        """The decode attention kernel (`attention.DECODE_KERNELS`) that `invariance` chose."""
        self.attention = DECODE_KERNELS[kernel]

    def weights(self, deltas: Deltas | None = None) -> Weights:
        """The weights of the base model plus `deltas`: the products that a delta touches
        are packed anew, the others are the base's own."""
        deltas = deltas or {}
        layers_n = len(self.model.model.layers)
        known = {_name(i, p) for i in range(layers_n) for p in ATTENTION + MLP} | {"lm_head"}
        if set(deltas) - known:
            raise ValueError(
                f"an adapter changes modules the engine cannot merge: {sorted(set(deltas) - known)}"
            )
        return self._pack(deltas, self.base)

    def _pack(self, deltas: Deltas, base: Weights | None) -> Weights:
        """Pack the base weights plus `deltas`, reusing `base`'s untouched products; the
        first packing (no `base`) releases the model's copies as it goes."""
        layers = []
        with torch.no_grad():
            for i, layer in enumerate(self.model.model.layers):
                layers.append(self._layer(i, deltas, base.layers[i] if base else None))
                if base is None:
                    self._release({_name(i, p): _module(layer, p) for p in ATTENTION + MLP})
            if base is not None and "lm_head" not in deltas:
                return Weights(layers, base.head, base.scores)
            lm_head = self.model.lm_head
            head = PackedLinear(self._weight("lm_head", lm_head, deltas, copied=self.packs))
            # float32 logits for choice scoring: the head itself, or its weight in blocks
            if head.dtype == torch.float32:
                scores = head
            elif head.weight is not None:
                scores = ScoreHead(head.weight)
            else:
                scores = ScoreHead(self._weight("lm_head", lm_head, deltas, copied=False))
            if base is None and self.model.lm_head.weight is not self.embed.weight:
                self._release({"lm_head": self.model.lm_head})  # the embedding stays: it's read
        return Weights(layers, head, scores)

    def _layer(self, index: int, deltas: Deltas, base: _Layer | None) -> _Layer:
        layer = self.model.model.layers[index]

        def touched(*projections: str) -> bool:
            return base is None or any(_name(index, p) in deltas for p in projections)

        def weight(projection: str, copied: bool = True) -> torch.Tensor:
            module = _module(layer, projection)
            return self._weight(_name(index, projection), module, deltas, copied)

        return _Layer(
            input_norm=layer.input_layernorm.weight,
            qkv=self._qkv(index, deltas) if touched(*QKV) else base.qkv,
            o=PackedLinear(weight("o_proj", self.packs)) if touched("o_proj") else base.o,
            post_norm=layer.post_attention_layernorm.weight,
            gate_up=(
                PackedLinear(torch.cat([weight("gate_proj"), weight("up_proj")]))
                if touched("gate_proj", "up_proj")
                else base.gate_up
            ),
            down=(
                PackedLinear(weight("down_proj", self.packs)) if touched("down_proj") else base.down
            ),
        )

    def _qkv(self, index: int, deltas: Deltas) -> PackedLinear:
        modules = [_module(self.model.model.layers[index], p) for p in QKV]
        weight = torch.cat(
            [self._weight(_name(index, p), m, deltas) for p, m in zip(QKV, modules, strict=True)]
        )
        bias = torch.cat([m.bias for m in modules]) if self.qkv_bias else None  # never adapted
        # Rotary embeddings are linear, so the attention scale can live in q's rows (and
        # bias). For head_dim 64 the scale is 1/8, a power of two, and this is exact; for
        # head_dim 128 (Qwen2) it is 2**-3.5 and each scaled weight rounds once more:
        # float32 logits stay within rounding of transformers' (tests/infra/lm/engine/
        # test_qwen2.py),
        # and in bf16 that rounding is the size of the one the q product's output gets.
        q_size = self.heads * self.head_dim
        weight[:q_size] *= self.head_dim**-0.5
        if bias is not None:
            bias[:q_size] *= self.head_dim**-0.5
        return PackedLinear(weight, bias)

    def _weight(
        self, name: str, module: torch.nn.Module, deltas: Deltas, copied: bool = True
    ) -> torch.Tensor:
        """Module `name`'s base weight plus its delta, if any.

        from_pretrained maps the checkpoint's files and reads a page when a tensor is used,
        and the pages read stay in this process's memory while anything (the embeddings)
        uses that mapping. So a weight the engine copies (packs, stacks or merges) is read
        through a mapping of its own (`checkpoint_weights`), gone once copied; one it uses
        as it is (not `copied`: a dtype this CPU cannot pack) is the model's own tensor,
        whose pages are then its only copy.
        """
        delta = deltas.get(name)
        w = module.weight.detach()
        key = f"{name}.weight"
        from_file = self.checkpoint is not None and key in self.checkpoint
        if from_file and (copied or delta is not None or w.is_meta):
            w = self.checkpoint.get(key)
        return w if delta is None else (w.float() + delta.float()).to(self.dtype)

    def _release(self, modules: dict[str, torch.nn.Module]) -> None:
        """Drop the model's copy of weights just packed, where the checkpoint holds them."""
        for name, module in modules.items():
            if self.checkpoint is not None and f"{name}.weight" in self.checkpoint:
                module.weight = torch.nn.Parameter(module.weight.to("meta"), requires_grad=False)

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
            with at_threads(self.prompt_threads):
                return attend_prompts(index, q, k, v)

        def attend_prompts(index: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
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


def _module(layer: torch.nn.Module, projection: str) -> torch.nn.Module:
    return getattr(layer.self_attn if projection in ATTENTION else layer.mlp, projection)
