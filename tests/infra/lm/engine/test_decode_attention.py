"""The decode-step attention kernel equals PyTorch's sdpa, on slab-like strided views."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from infra.lm.engine import decode_attention
from infra.lm.model_files import resolve_model_path


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_grouped_kernel_equals_sdpa_on_strided_views(dtype, tol):
    gen = torch.Generator().manual_seed(0)
    rows, heads, kv_heads, cols, dim = 5, 9, 3, 40, 16
    # like the slab: a bigger buffer, of which a few rows and a column window are live
    keys = torch.randn(8, kv_heads, 64, dim, generator=gen).to(dtype)[:rows, :, 7 : 7 + cols]
    values = torch.randn(8, kv_heads, 64, dim, generator=gen).to(dtype)[:rows, :, 7 : 7 + cols]
    query = torch.randn(rows, heads, 1, dim, generator=gen).to(dtype)
    mask = torch.rand(rows, 1, 1, cols, generator=gen) > 0.3
    mask[:, ..., -1] = True  # every row sees at least its own token
    assert not keys.is_contiguous()

    ours = decode_attention.grouped_decode_attention(query, keys, values, mask, dim**-0.5)
    ref = F.scaled_dot_product_attention(query, keys, values, attn_mask=mask, enable_gqa=True)
    assert ours.shape == (rows, 1, heads, dim)
    torch.testing.assert_close(ours, ref.transpose(1, 2), atol=tol, rtol=tol)


def test_masked_columns_do_not_count():
    query = torch.randn(1, 2, 1, 4)
    keys, values = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    mask = torch.tensor([True, False, True]).view(1, 1, 1, 3)
    changed = values.clone()
    changed[:, :, 1] = 1e6  # a masked column's value must not leak into the output
    a = decode_attention.grouped_decode_attention(query, keys, values, mask, 0.5)
    b = decode_attention.grouped_decode_attention(query, keys, changed, mask, 0.5)
    torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_model_decode_step_matches_sdpa():
    """The real model, one prompt then one decode step, under both implementations."""
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model_path(), dtype=torch.float32, attn_implementation=decode_attention.NAME
    ).eval()
    prompt = torch.tensor([[1, 4093, 28, 1461, 314, 260, 3575, 282, 4649, 47]])
    step = torch.tensor([[30]])

    def next_logits() -> torch.Tensor:
        with torch.inference_mode():
            out = model(input_ids=prompt, use_cache=True)
            return model(input_ids=step, cache=out.past_key_values, use_cache=True).logits

    ours = next_logits()
    model.set_attn_implementation("sdpa")
    torch.testing.assert_close(ours, next_logits(), atol=1e-4, rtol=1e-4)
