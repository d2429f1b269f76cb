"""The slab under churn: rows join, grow past several block edges and leave, the buffers
grow and shrink, and every step's logits still equal a plain forward over each row."""

from __future__ import annotations

import random

import torch

from infra.lm.engine.attention import BLOCK
from infra.lm.engine.fused_decode import FusedDecoder, Prompt
from tests.infra.lm.engine.test_fused_decode import last_logits, new_slab, tiny_llama


def test_steps_equal_a_plain_forward_through_joins_leaves_and_resizes():
    model = tiny_llama()
    fused = FusedDecoder(model)
    slab = new_slab(model)
    rng = random.Random(0)
    rows: list[list[int]] = []  # each live row's tokens, in slab order
    widths = [0]
    with torch.inference_mode():
        for step in range(3 * BLOCK):
            if len(rows) < 4 and rng.random() < 0.15:  # a group of 1-2 prompts joins
                prompts = [
                    [rng.randrange(3, 64) for _ in range(rng.randint(1, 9))]
                    for _ in range(min(rng.randint(1, 2), 4 - len(rows)))
                ]
                _, kv = fused.prefill([Prompt(p) for p in prompts], fused.base)
                for layers in kv:
                    slab.add(layers)
                rows += [list(p) for p in prompts]
            if not rows:
                continue
            ids = [rng.randrange(3, 64) for _ in rows]
            logits = fused.step(torch.tensor(ids), slab, fused.base)
            widths.append(slab.cols)
            for row, token in zip(rows, ids, strict=True):
                row.append(token)
            if step % 7 == 0:  # a plain forward is slow: check every 7th step
                for i, row in enumerate(rows):
                    torch.testing.assert_close(
                        logits[i], last_logits(model, row), atol=1e-5, rtol=1e-5
                    )
            longest = max(map(len, rows))
            assert slab.cols == -(-longest // BLOCK) * BLOCK  # no wider than the step needed
            leaving = [i for i in range(len(rows)) if rng.random() < 0.03]
            for src, dst in slab.remove(leaving):
                rows[dst] = rows[src]
            del rows[slab.n :]
    steps = list(zip(widths, widths[1:], strict=False))
    assert any(b > a > 0 for a, b in steps) and any(b < a for a, b in steps)  # grew, shrank
