"""Packed weights give the products of the plain ones, fall back where they cannot pack,
and, run by the plan checked on this CPU, give a row the same bits in any batch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infra.lm.engine.invariance import BODY_MAX_ROWS, BODY_SIZES, check_product
from infra.lm.engine.packed_linear import PackedLinear

ONEDNN = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN")


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_products_equal_linear(dtype, with_bias):
    torch.manual_seed(0)
    weight, x = torch.randn(48, 32, dtype=dtype) / 8, torch.randn(5, 32, dtype=dtype)
    bias = torch.randn(48, dtype=dtype) if with_bias else None
    with torch.inference_mode():
        torch.testing.assert_close(
            PackedLinear(weight, bias)(x), F.linear(x, weight, bias), atol=1e-4, rtol=1e-3
        )


def test_without_onednn_the_plain_product_is_used(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    weight, x = torch.randn(6, 4), torch.randn(3, 4)
    linear = PackedLinear(weight)
    assert linear.packed is None
    torch.testing.assert_close(linear(x), x @ weight.t())


@ONEDNN
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_packed_weight_keeps_no_second_copy(dtype):
    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("oneDNN packs bf16 only with AVX-512 or AVX-NE-CONVERT; this CPU has neither")
    linear = PackedLinear(torch.randn(8, 4, dtype=dtype))
    assert linear.packed is not None and linear.packed.is_mkldnn
    assert linear.weight is None


def test_a_weight_the_cpu_cannot_pack_is_kept_plain(monkeypatch):
    def refuse(weight):
        raise RuntimeError("bf16 path needs the cpu support avx512bw")  # oneDNN on AVX2

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", refuse)
    weight, x = torch.randn(6, 4, dtype=torch.bfloat16), torch.randn(3, 4, dtype=torch.bfloat16)
    linear = PackedLinear(weight)
    assert linear.packed is None and linear.weight is weight
    torch.testing.assert_close(linear(x), F.linear(x, weight))


@ONEDNN
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_rows_product_does_not_depend_on_how_many_rows_share_it(dtype):
    """The row counts and shapes that broke on AVX-512 and AMX Xeons, on fresh inputs
    (and Qwen2.5-1.5B's q/k/v, with its bias)."""
    torch.manual_seed(1)
    for out, inp, bias in (
        (576, 1536, False),
        (3072, 576, False),
        (960, 576, False),
        (2048, 1536, True),
    ):
        linear = PackedLinear(
            torch.randn(out, inp, dtype=dtype) / 20, torch.randn(out, dtype=dtype) if bias else None
        )
        linear.plan = check_product(linear, BODY_MAX_ROWS, BODY_SIZES).plan
        x = torch.randn(64, inp, dtype=dtype)
        with torch.inference_mode():
            alone = [linear(x[i : i + 1])[0] for i in range(8)]
            for rows in (2, 8, 33, 40, 64):
                together = linear(x[:rows])
                shifted = linear(torch.roll(x, 3, 0)[:rows])
                for i in range(min(rows, 8)):
                    assert torch.equal(together[i], alone[i]), (out, inp, rows, i)
                    if i + 3 < rows:
                        assert torch.equal(shifted[i + 3], alone[i]), (out, inp, rows, i)
