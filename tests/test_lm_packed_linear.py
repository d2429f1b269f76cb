"""Packed weights give the products of the plain ones, and fall back where they cannot pack."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infra.lm.packed_linear import PackedLinear

ONEDNN = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_products_equal_linear(dtype):
    torch.manual_seed(0)
    weight, x = torch.randn(48, 32, dtype=dtype) / 8, torch.randn(5, 32, dtype=dtype)
    with torch.inference_mode():
        torch.testing.assert_close(
            PackedLinear(weight)(x), F.linear(x, weight), atol=1e-4, rtol=1e-3
        )


def test_without_onednn_the_plain_product_is_used(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    weight, x = torch.randn(6, 4), torch.randn(3, 4)
    linear = PackedLinear(weight)
    assert linear.packed is None
    torch.testing.assert_close(linear(x), x @ weight.t())


@ONEDNN
def test_a_packed_weight_keeps_no_second_copy():
    linear = PackedLinear(torch.randn(8, 4, dtype=torch.bfloat16))
    assert linear.packed is not None and linear.packed.is_mkldnn
    assert linear.weight is None


@ONEDNN
def test_a_rows_product_does_not_depend_on_how_many_rows_share_it():
    torch.manual_seed(0)
    for out, inp in ((576, 1536), (3072, 576), (49152, 576)):
        linear = PackedLinear(torch.randn(out, inp, dtype=torch.bfloat16) / 20)
        x = torch.randn(40, inp, dtype=torch.bfloat16)
        with torch.inference_mode():
            alone = linear(x[:1])[0]
            for rows in (2, 8, 33, 40):
                assert torch.equal(linear(x[:rows])[0], alone), (out, inp, rows)
