"""The engine's attention kernels: the same numbers as PyTorch's sdpa, and a row's bits
independent of the slab's width and of its neighbours where the kernel promises it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infra.lm.engine import invariance
from infra.lm.engine.attention import BLOCK, CHUNK, DECODE_KERNELS, blocked, chunks, prompt_chunk


def slab_like(rows: int, cols: int, dtype, seed: int = 0):
    """q [rows, 3, 3, 16] (scaled), left-aligned keys/values with zeros past each length."""
    gen = torch.Generator().manual_seed(seed)
    q = (torch.randn(rows, 3, 3, 16, generator=gen) / 4).to(dtype)
    keys = torch.randn(rows, 3, cols, 16, generator=gen).to(dtype)
    values = torch.randn(rows, 3, cols, 16, generator=gen).to(dtype)
    lengths = torch.randint(1, cols + 1, (rows,), generator=gen)
    for r, n in enumerate(lengths.tolist()):
        keys[r, :, n:] = 0
        values[r, :, n:] = 0
    return q, keys, values, lengths


def bias_for(lengths: torch.Tensor, cols: int) -> torch.Tensor:
    hidden = torch.arange(cols) >= lengths[:, None]
    return torch.zeros(len(lengths), cols).masked_fill_(hidden, float("-inf"))[:, None, None]


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("kernel", sorted(DECODE_KERNELS))
def test_decode_kernels_equal_sdpa(kernel, dtype, tol):
    q, keys, values, lengths = slab_like(5, 3 * BLOCK, dtype)
    out = DECODE_KERNELS[kernel](q, keys, values, bias_for(lengths, 3 * BLOCK), lengths)
    mask = (torch.arange(3 * BLOCK) < lengths[:, None])[:, None, None]
    ref = F.scaled_dot_product_attention(
        q.reshape(5, 9, 1, 16), keys, values, attn_mask=mask, scale=1.0, enable_gqa=True
    )
    torch.testing.assert_close(out.reshape(5, 9, 1, 16), ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_blocked_keeps_a_rows_bits_whatever_the_width_and_the_neighbours(dtype):
    q, keys, values, lengths = slab_like(9, 6 * BLOCK, dtype, seed=1)
    lengths[0] = BLOCK + 7
    keys[0, :, BLOCK + 7 :] = 0
    values[0, :, BLOCK + 7 :] = 0

    def row0(order: list[int], cols: int) -> torch.Tensor:
        out = blocked(
            q[order],
            keys[order, :, :cols],
            values[order, :, :cols],
            bias_for(lengths[order], cols),
            lengths[order],
        )
        return out[order.index(0)]

    alone = row0([0], 2 * BLOCK)
    for cols in (2 * BLOCK, 4 * BLOCK, 6 * BLOCK):
        assert torch.equal(row0([0, *range(1, 9)], cols), alone)
        assert torch.equal(row0([5, 3, 0, 8], cols), alone)


def test_chunks_cut_at_fixed_positions():
    assert chunks(0, 10) == [(0, 10)]
    assert chunks(0, CHUNK + 3) == [(0, CHUNK), (CHUNK, CHUNK + 3)]
    assert chunks(CHUNK, 3 * CHUNK) == [(CHUNK, 2 * CHUNK), (2 * CHUNK, 3 * CHUNK)]
    assert chunks(5, CHUNK + 1) == [(5, CHUNK), (CHUNK, CHUNK + 1)]


def test_a_prompt_chunk_is_causal_attention_over_the_whole_prompt():
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(6, 100, 16, generator=gen) / 4
    keys, values = torch.randn(2, 100, 16, generator=gen), torch.randn(2, 100, 16, generator=gen)
    whole = F.scaled_dot_product_attention(
        q[None], keys[None], values[None], is_causal=True, scale=1.0, enable_gqa=True
    )[0]
    part = prompt_chunk(q[:, 64:90].transpose(0, 1), keys[:, :90], values[:, :90], 64)
    torch.testing.assert_close(part.transpose(0, 1), whole[:, 64:90], atol=1e-5, rtol=1e-5)


def test_the_engine_check_rejects_a_kernel_that_moves_a_lone_row_of_the_engines_q(monkeypatch):
    """On an AVX2 EPYC one matmul took another path for a lone row when q was, as in the
    engine, a slice of the rotated q and k (not contiguous): the check must see that
    layout, or it passes a kernel the engine then runs with other bits."""

    def strided_q_takes_another_path(q, keys, values, bias, lengths):
        # as that matmul did: rows of the sliced layout (two or more) take another path
        # than a lone row, whose slice is contiguous in memory
        out = DECODE_KERNELS["one-shot"](q, keys, values, bias, lengths)
        return out if q.is_contiguous() else out + 1e-3

    kernels = {"one-shot": strided_q_takes_another_path, "blocked": blocked}
    monkeypatch.setattr(invariance, "DECODE_KERNELS", kernels)
    monkeypatch.setattr(invariance, "_attention_checks", {})
    assert invariance.check_attention(3, 3, 16, torch.float32).kernel == "blocked"


def test_the_engine_check_rejects_a_kernel_that_moves_a_long_row_in_a_wide_slab(monkeypatch):
    """On an AVX2 EPYC, one bf16 matmul kept every row's bits up to 320 columns, the
    widest the check used to try, but a row of 1,283 tokens among others took another path
    than alone (the 1.5B teacher's heads). A slab is as wide as its longest row, so the
    check tries widths up to the context."""

    def long_rows_in_company_move(q, keys, values, bias, lengths):
        out = blocked(q, keys, values, bias, lengths)  # holds on any CPU: only the skew moves
        return out + 1e-3 if keys.shape[2] > 1024 and q.shape[0] > 1 else out

    kernels = {"one-shot": long_rows_in_company_move, "blocked": blocked}
    monkeypatch.setattr(invariance, "DECODE_KERNELS", kernels)
    monkeypatch.setattr(invariance, "_attention_checks", {})
    assert invariance.check_attention(3, 3, 16, torch.float32, context=320).kernel == "one-shot"
    assert invariance.check_attention(3, 3, 16, torch.float32, context=2048).kernel == "blocked"
