"""Row plans group a product's rows into kernel calls; the check picks the cheapest that
keeps every row's bits, here against products whose "kernels" misbehave on purpose."""

from __future__ import annotations

import torch

from infra.lm.engine.invariance import check_product
from infra.lm.engine.row_plan import RowPlan


def recording(calls: list[int]):
    def product(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape[0])
        return x * 2

    return product


def test_rows_are_padded_split_or_tiled_and_come_back_in_order():
    x = torch.arange(10.0)[:, None]
    for plan, sizes in (
        (RowPlan(), [10]),
        (RowPlan(min_rows=16), [16]),
        (RowPlan(max_rows=4), [4, 4, 2]),
        (RowPlan(min_rows=3, max_rows=4), [4, 4, 3]),
        (RowPlan(tile=4), [4, 4, 4]),
        (RowPlan(tile=1), [1] * 10),
    ):
        calls: list[int] = []
        assert torch.equal(plan.apply(recording(calls), x), x * 2), plan
        assert calls == sizes, plan


class Linear:
    """A product whose result also depends on how many rows share the call."""

    def __init__(self, skew, shape=(6, 5), dtype=torch.float32):
        self.weight = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        self.shape, self.dtype, self.skew = shape, dtype, skew
        self.key = (shape, dtype, "")  # checks are memoized by it: each test its own shape

    def product(self, x: torch.Tensor) -> torch.Tensor:
        # no sum over the inputs: this "kernel" changes bits only where `skew` says
        return x[:, :1] * self.weight[:, 0] + self.skew(x.shape[0])


def check(skew, shape):
    return check_product(Linear(skew, shape), max_rows=64, sizes=(1, 2, 3, 8, 17, 33, 40, 64))


def test_a_one_row_kernel_of_its_own_is_padded_to_two_rows():
    found = check(lambda rows: 1e-3 if rows == 1 else 0.0, (6, 5))
    assert found.holds and found.plan == RowPlan(min_rows=2, max_rows=64)


def test_another_kernel_above_32_rows_gets_33_rows_every_call():
    found = check(lambda rows: 1e-3 if rows > 32 else 0.0, (6, 7))
    assert found.holds and found.plan == RowPlan(min_rows=33, max_rows=64)


def test_a_kernel_that_changes_with_every_row_count_runs_fixed_tiles():
    found = check(lambda rows: rows * 1e-3, (6, 9))
    assert found.holds and found.plan == RowPlan(tile=16)


def test_a_kernel_that_does_not_look_at_the_row_count_needs_nothing():
    found = check(lambda rows: 0.0, (6, 11))
    assert found.holds and found.plan == RowPlan(max_rows=64)
    assert not found.threads_change_bits
