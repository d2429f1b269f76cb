"""The fused decode step gives transformers' own logits, and is used only where it applies."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from infra.lm import decode_attention
from infra.lm.fused_decode import FusedDecoder
from infra.lm.kv_slab import KVSlab
from infra.lm.model_files import resolve_model_path
from infra.lm.prefix import forward_suffixes


def tiny_llama(**overrides) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation=decode_attention.NAME,
        **overrides,
    )
    return LlamaForCausalLM(config).eval()


def step_both_ways(model, prompts: list[list[int]], next_ids: list[int]):
    """Prefill `prompts` into a slab, then one decode step by each path on the same slab."""
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    slab = KVSlab(cfg.num_hidden_layers, cfg.num_key_value_heads, head_dim, model.dtype, 4)
    with torch.inference_mode():
        _, layers, valid = forward_suffixes(model, prompts, None, pad_id=0)
        slab.append(layers, valid)
        mask, positions = slab.step_inputs()
        ids = torch.tensor([[t] for t in next_ids])
        fused = FusedDecoder.for_model(model).step(ids, positions, mask, slab)
        # the same column is written again, with the same values
        ref = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=slab).logits[
            :, -1
        ]
    return fused, ref


def test_equals_the_model_forward_on_a_ragged_batch():
    model = tiny_llama()
    fused, ref = step_both_ways(model, [[5, 6, 7, 8, 9], [3, 4], [10, 11, 12]], [1, 2, 3])
    torch.testing.assert_close(fused, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_equals_the_model_forward_on_the_real_model():
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model_path(), dtype=torch.float32, attn_implementation=decode_attention.NAME
    ).eval()
    prompts = [[1, 4093, 28, 1461, 314], [1, 9690, 30]]
    fused, ref = step_both_ways(model, prompts, [260, 47])
    # fused kernels sum in another order: float32 rounding over 30 layers, no more
    torch.testing.assert_close(fused, ref, atol=5e-4, rtol=1e-4)
    assert torch.equal(fused.argmax(-1), ref.argmax(-1))
    with torch.inference_mode():
        prefilled = FusedDecoder.for_model(model).prefill(prompts, None, pad_id=0)[0]
        ref = forward_suffixes(model, prompts, None, pad_id=0)[0].logits[:, -1]
    torch.testing.assert_close(prefilled, ref, atol=5e-4, rtol=1e-4)


def test_prefill_equals_the_model_forward_after_a_shared_prefix():
    model = tiny_llama()
    fused = FusedDecoder.for_model(model)
    suffixes = [[5, 6, 7, 8, 9], [3, 4], [10, 11, 12]]
    with torch.inference_mode():
        for prefix_ids in ([], [20, 21, 22, 23]):
            prefix = None
            if prefix_ids:
                _, prefix, _ = forward_suffixes(model, [prefix_ids], None, pad_id=0)
            out, ref_layers, ref_valid = forward_suffixes(model, suffixes, prefix, pad_id=0)
            logits, layers, valid = fused.prefill(suffixes, prefix, pad_id=0)
            torch.testing.assert_close(logits, out.logits[:, -1], atol=1e-5, rtol=1e-5)
            assert torch.equal(valid, ref_valid)
            for (k, v), (ref_k, ref_v) in zip(layers, ref_layers, strict=True):
                held = valid[:, None, :, None]  # padding columns may differ: never read
                torch.testing.assert_close(k * held, ref_k * held, atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(v * held, ref_v * held, atol=1e-5, rtol=1e-5)
            # and each row's logits are those of its whole prompt, run alone
            for row, suffix in enumerate(suffixes):
                alone = model(input_ids=torch.tensor([prefix_ids + suffix])).logits[0, -1]
                torch.testing.assert_close(logits[row], alone, atol=1e-5, rtol=1e-5)


def test_only_plain_llama_models_are_fused():
    assert FusedDecoder.for_model(tiny_llama()) is not None
    assert FusedDecoder.for_model(tiny_llama(attention_bias=True)) is None
    assert FusedDecoder.for_model(tiny_llama(hidden_act="gelu")) is None
