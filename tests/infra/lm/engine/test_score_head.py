"""The float32 score head: a float32 copy's logits, computed in blocks from bf16, and a
row's bits independent of the rows beside it under the plan checked on this CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from infra.lm.engine.invariance import HEAD_MAX_ROWS, HEAD_SIZES, check_product
from infra.lm.engine.score_head import BLOCK, ScoreHead


def test_logits_equal_a_float32_copy_s_across_blocks():
    torch.manual_seed(0)
    weight = torch.randn(BLOCK + 300, 64).bfloat16()  # a full block and a partial one
    x = torch.randn(5, 64).bfloat16()
    with torch.inference_mode():
        logits = ScoreHead(weight)(x)
        ref = F.linear(x.float(), weight.float())
    assert logits.dtype == torch.float32 and logits.shape == (5, BLOCK + 300)
    torch.testing.assert_close(logits, ref, atol=1e-5, rtol=1e-5)


def test_a_row_s_logits_do_not_depend_on_how_many_rows_share_the_call():
    torch.manual_seed(1)
    head = ScoreHead(torch.randn(BLOCK + 300, 96).bfloat16())
    head.plan = check_product(head, HEAD_MAX_ROWS, HEAD_SIZES).plan
    x = torch.randn(40, 96)
    with torch.inference_mode():
        alone = [head(x[i : i + 1])[0] for i in range(6)]
        for rows in (2, 7, 33, 40):
            together = head(x[:rows])
            assert all(torch.equal(together[i], alone[i]) for i in range(min(rows, 6))), rows
