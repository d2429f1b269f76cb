"""The engine's batch invariance, checked once per process on the CPU it runs on.

A request's greedy tokens and log-probabilities must be the same bits alone and in any
batch. Two parts of the engine put rows of several requests into one kernel call: the
products (oneDNN picks kernels by row count and ISA) and a decode step's attention (each
row's sums run over a slab padded to its neighbours' lengths). Prompts are attended one
at a time in fixed chunks, so their shapes never depend on a batch (`attention`).

Both parts run here on random inputs: rows alone, then among others in batches of many
sizes, at another position, in slabs as wide as the model's context, and on one thread
as well as all (the engine drops to one thread while other processes compete for its
cores). The first candidate under which no row's bits move is used, cheapest first:
products with any row count, then at least m rows per call, then fixed tiles, then one
row per call; attention as one matmul, then in fixed blocks, then per row. If either
part's bits move with the thread count, the thread count stays fixed. (A prompt's
attention is not checked: it always runs on all the engine's threads, see
`fused_decode`.) Kernels are chosen by shape, never by value, so the verdict holds for
the real weights and activations. `EnginePlan.describe()` says what this CPU
got; `flywheel serve-model` and `make bench-lm` print it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from infra.lm.engine.attention import BLOCK, DECODE_KERNELS
from infra.lm.engine.cpu import cpu_summary
from infra.lm.engine.packed_linear import PackedLinear
from infra.lm.engine.row_plan import RowPlan
from infra.lm.engine.score_head import ScoreHead
from infra.lm.engine.thread_governor import at_threads

Product = PackedLinear | ScoreHead

# Row counts a product is checked at: kernels switch around powers of two and their tails.
BODY_SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255)
BODY_SIZES += (256, 257, 511, 512, 513)
HEAD_SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)
BODY_MAX_ROWS, HEAD_MAX_ROWS = 512, 64  # bigger calls are split: never seen unchecked
# Rows also run alone. In bf16 a one-row kernel that sums in another order changes 1 row
# in 15 of a 576-wide product (the last bit after rounding) and nearly every row of the
# 49152-wide head, so narrow products follow many rows.
ALONE_ROWS = 128 * 576  # / output width: 128 rows of a 576-wide product, 8 of the head
SHIFT = 5  # the batches are also run rolled by this many rows: another position
ONE_THREAD_SIZES = (1, 2, 9, 33, 64)


def _candidates(max_rows: int) -> list[RowPlan]:
    floors = [m for m in (2, 4, 8, 16, 17, 32, 33, 64, 65) if m < max_rows]
    return [
        RowPlan(max_rows=max_rows),
        *(RowPlan(min_rows=m, max_rows=max_rows) for m in floors),
        *(RowPlan(tile=t) for t in (16, 32, 64)),
        RowPlan(tile=1),
    ]


def _keeps_rows(run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, sizes) -> bool:
    """`run` gives every row of x the bits it gets in the biggest batch, in every batch
    size, rolled to another position, and alone."""
    biggest = run(x[: max(sizes)])
    for n in sizes:
        if not torch.equal(run(x[:n]), biggest[:n]):
            return False
        if n > SHIFT and not torch.equal(
            run(torch.roll(x, SHIFT, 0)[:n])[SHIFT:], biggest[: n - SHIFT]
        ):
            return False
    alone = min(len(biggest), max(8, ALONE_ROWS // biggest.shape[1]))
    return all(torch.equal(run(x[i : i + 1])[0], biggest[i]) for i in range(alone))


@dataclass(frozen=True)
class ProductCheck:
    plan: RowPlan
    holds: bool  # False: not even one row per call kept its bits
    threads_change_bits: bool


_product_checks: dict[tuple, ProductCheck] = {}


def check_product(linear: Product, max_rows: int, sizes: tuple[int, ...]) -> ProductCheck:
    """The cheapest row plan under which this product keeps every row's bits (memoized
    per key and thread count: the kernels do not look at the values)."""
    key = (linear.key, torch.get_num_threads(), max_rows)
    if key not in _product_checks:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(max(sizes), linear.shape[1], generator=generator)
        x = x.to(linear.dtype)
        for plan in _candidates(max_rows):

            def run(rows: torch.Tensor, plan: RowPlan = plan) -> torch.Tensor:
                return plan.apply(linear.product, rows)

            if _keeps_rows(run, x, sizes):
                _product_checks[key] = ProductCheck(plan, True, _threads_move(run, x))
                break
        else:
            _product_checks[key] = ProductCheck(RowPlan(tile=1), False, True)
    return _product_checks[key]


def _threads_move(run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> bool:
    """Whether one thread gives other bits than all of them."""
    if torch.get_num_threads() == 1:
        return False
    everyone = [run(x[:n]) for n in ONE_THREAD_SIZES]
    with at_threads(1):
        alone = [run(x[:n]) for n in ONE_THREAD_SIZES]
    return not all(torch.equal(a, b) for a, b in zip(everyone, alone, strict=True))


@dataclass(frozen=True)
class AttentionCheck:
    kernel: str
    holds: bool
    threads_change_bits: bool


_attention_checks: dict[tuple, AttentionCheck] = {}


def check_attention(
    kv_heads: int, group: int, dim: int, dtype: torch.dtype, context: int = 8192
) -> AttentionCheck:
    """The first decode attention kernel under which a row's output does not depend on the
    slab's width (up to `context` columns), on its neighbours or on its position among
    them."""
    key = (kv_heads, group, dim, dtype, context, torch.get_num_threads())
    if key in _attention_checks:
        return _attention_checks[key]
    slabs = [_Slab(65, 5 * BLOCK, (BLOCK + 37,), kv_heads, group, dim, dtype)]
    # The slab is as wide as its longest row, which depends on which requests run beside
    # a row, so on timing: every width a kernel may switch at, up to the context.
    widest = -(-context // BLOCK) * BLOCK
    if widest > 5 * BLOCK:
        long_rows = (5 * BLOCK + 11, min(widest // 2, 20 * BLOCK) + 3)
        slabs.append(_Slab(7, widest, long_rows, kv_heads, group, dim, dtype))

    def holds(kernel) -> bool:
        return all(slab.keeps_followed_row(kernel) for slab in slabs)

    for name, kernel in DECODE_KERNELS.items():
        if holds(kernel):
            narrow = slabs[0]
            everyone = narrow.run(kernel, torch.arange(narrow.rows), narrow.widest)
            with at_threads(1):
                alone = narrow.run(kernel, torch.arange(narrow.rows), narrow.widest)
            _attention_checks[key] = AttentionCheck(name, True, not torch.equal(alone, everyone))
            break
    else:
        _attention_checks[key] = AttentionCheck("per-row", False, True)
    return _attention_checks[key]


class _Slab:
    """Random rows laid out as the engine's KV slab: rows 0..len(followed)-1 are the
    followed ones, at those lengths; the others have random lengths up to `widest`."""

    def __init__(self, rows, widest, followed, kv_heads, group, dim, dtype):
        generator = torch.Generator().manual_seed(0)
        self.rows, self.widest, self.followed = rows, widest, followed
        self.kv_heads, self.group, self.dim = kv_heads, group, dim
        heads = kv_heads * group
        # q as the engine passes it: the head of each row's rotated q and k [rows, q + k
        # heads, dim], so not contiguous. On an AVX2 EPYC one matmul over a contiguous q
        # kept every row's bits, over this layout one row alone took another path.
        self.qk = torch.randn(rows, heads + kv_heads, dim, generator=generator)
        self.qk = self.qk.mul_(dim**-0.5).to(dtype)
        self.keys, self.values = (
            torch.randn(rows, kv_heads, widest, dim, generator=generator).to(dtype) for _ in "kv"
        )
        self.lengths = torch.randint(1, widest, (rows,), generator=generator)
        self.lengths[: len(followed)] = torch.tensor(followed)
        for r, n in enumerate(self.lengths.tolist()):  # left-aligned, zeros after
            self.keys[r, :, n:] = 0
            self.values[r, :, n:] = 0

    def run(self, kernel, picked: torch.Tensor, width: int) -> torch.Tensor:
        n = self.lengths[picked]
        bias = torch.zeros(len(picked), width).masked_fill_(
            torch.arange(width) >= n[:, None], float("-inf")
        )
        heads = self.kv_heads * self.group
        q = self.qk[picked][:, :heads].view(len(picked), self.kv_heads, self.group, self.dim)
        keys, values = self.keys[picked, :, :width], self.values[picked, :, :width]
        return kernel(q, keys, values, bias[:, None, None], n)

    def widths(self, length: int) -> list[int]:
        """The row's own width, one block more, then doubling up to the widest."""
        own = (length // BLOCK + 1) * BLOCK  # room for the step's own column
        wider = [own, own + BLOCK]
        while wider[-1] * 2 <= self.widest:
            wider.append(wider[-1] * 2)
        return sorted({w for w in [*wider, self.widest] if own <= w <= self.widest})

    def keeps_followed_row(self, kernel) -> bool:
        for followed, length in enumerate(self.followed):
            widths = self.widths(length)
            alone = self.run(kernel, torch.tensor([followed]), widths[0])[0]
            others = [r for r in range(self.rows) if r != followed]
            for width in widths:
                # the others' lengths may exceed a narrow width: they are cut there, which
                # changes their rows, not the followed one
                for batch in sorted({1, 2, 7, 33, self.rows} & set(range(1, self.rows + 1))):
                    at = min(SHIFT, batch - 1)  # the followed row among `batch - 1` others
                    order = torch.tensor(others[:at] + [followed] + others[at : batch - 1])
                    if not torch.equal(self.run(kernel, order, width)[at], alone):
                        return False
        return True


@dataclass(frozen=True)
class EnginePlan:
    """What the engine runs, and whether a request's numbers are batch-invariant."""

    products: dict[tuple, RowPlan]  # by the product's `key`: shape, dtype, kind
    attention: str
    invariant: bool  # every check held (False as well when checks were turned off)
    checked: bool
    threads_change_bits: bool  # then the thread count stays fixed under contention

    def plan_for(self, linear: Product) -> RowPlan:
        return self.products.get(linear.key, RowPlan())

    def describe(self) -> str:
        if not self.checked:
            return "fast engine: batch invariance not checked (lm.batch_invariant = false)"
        special = sorted(
            {
                f"{'x'.join(map(str, shape))} {str(dtype).removeprefix('torch.')}"
                f"{' ' + kind if kind else ''}: {plan.describe()}"
                for (shape, dtype, kind), plan in self.products.items()
                if plan.min_rows > 1 or plan.tile
            }
        )
        products = "; ".join(special) if special else "any number of rows per call"
        verdict = "batch-invariant" if self.invariant else "NOT batch-invariant"
        threads = (
            "thread count fixed (it changes bits here)"
            if self.threads_change_bits
            else "threads follow the cores it gets"
        )
        return (
            f"{verdict} on {cpu_summary()}: products {products}; decode attention "
            f"{self.attention}; prompts per prompt in fixed chunks; {threads}"
        )


def check_engine(
    body: list[PackedLinear],
    heads: list[Product],
    kv_heads: int,
    group: int,
    dim: int,
    context: int = 8192,
) -> EnginePlan:
    """Check every distinct product shape (layers' and vocabulary heads') and the decode
    attention over slabs up to `context` columns."""
    products, holds, moved = {}, True, False
    for linears, max_rows, sizes in (
        (body, BODY_MAX_ROWS, BODY_SIZES),
        (heads, HEAD_MAX_ROWS, HEAD_SIZES),
    ):
        for linear in linears:
            if linear.key not in products:
                check = check_product(linear, max_rows, sizes)
                products[linear.key] = check.plan
                holds &= check.holds
                moved |= check.threads_change_bits
    attention = check_attention(kv_heads, group, dim, body[0].dtype, context)
    return EnginePlan(
        products=products,
        attention=attention.kernel,
        invariant=holds and attention.holds,
        checked=True,
        threads_change_bits=moved or attention.threads_change_bits,
    )


def unchecked_plan() -> EnginePlan:
    """The fast engine: any row count, one matmul attention, nothing checked."""
    return EnginePlan({}, "one-shot", invariant=False, checked=False, threads_change_bits=False)
