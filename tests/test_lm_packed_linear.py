"""Packed weights give the products of the plain ones, and fall back where they cannot pack."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infra.lm.packed_linear import PackedLinear


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_products_equal_linear_and_addmm(dtype):
    torch.manual_seed(0)
    weight = torch.randn(48, 32, dtype=dtype) / 8
    x, residual = torch.randn(5, 32, dtype=dtype), torch.randn(5, 48, dtype=dtype)
    linear = PackedLinear(weight)
    with torch.inference_mode():
        torch.testing.assert_close(linear(x), F.linear(x, weight), atol=1e-4, rtol=1e-3)
        torch.testing.assert_close(
            linear(x, add=residual), torch.addmm(residual, x, weight.t()), atol=1e-4, rtol=1e-3
        )


def test_without_onednn_the_plain_product_is_used(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    weight, x = torch.randn(6, 4), torch.randn(3, 4)
    linear = PackedLinear(weight)
    assert linear.packed is None
    torch.testing.assert_close(linear(x, add=torch.ones(3, 6)), 1 + x @ weight.t())


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch without oneDNN")
def test_a_packed_weight_keeps_no_second_copy():
    linear = PackedLinear(torch.randn(8, 4, dtype=torch.bfloat16))
    assert linear.packed is not None and linear.packed.is_mkldnn
    assert linear.weight is None


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch without oneDNN")
def test_a_rows_product_does_not_depend_on_how_many_rows_share_it():
    torch.manual_seed(0)
    linear = PackedLinear(torch.randn(576, 1536, dtype=torch.bfloat16) / 20)
    x, residual = (
        torch.randn(8, 1536, dtype=torch.bfloat16),
        torch.randn(8, 576, dtype=torch.bfloat16),
    )
    with torch.inference_mode():
        for rows in (2, 8):
            assert torch.equal(linear(x[:rows])[0], linear(x[:1])[0])
            assert torch.equal(
                linear(x[:rows], add=residual[:rows])[0], linear(x[:1], add=residual[:1])[0]
            )
