"""The slab under churn: rows join, grow past several relayouts and leave, and every
step's logits still equal a plain forward over each row's own tokens."""

from __future__ import annotations

import random

import torch

from infra.lm import kv_slab
from infra.lm.fused_decode import FusedDecoder
from infra.lm.kv_slab import KVSlab
from infra.lm.prefix import forward_suffixes
from tests.test_lm_fused_decode import tiny_llama


def test_steps_equal_a_plain_forward_through_joins_leaves_and_relayouts():
    model = tiny_llama()
    cfg = model.config
    fused = FusedDecoder.for_model(model)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    slab = KVSlab(cfg.num_hidden_layers, cfg.num_key_value_heads, head_dim, model.dtype, 4)
    rng = random.Random(0)
    rows: list[list[int]] = []  # each live row's tokens, in slab order
    relayouts = 0
    with torch.inference_mode():
        for _ in range(3 * kv_slab.GROWTH):
            if len(rows) < 4 and rng.random() < 0.4:  # a group of 1-2 prompts joins
                prompts = [
                    [rng.randrange(3, 64) for _ in range(rng.randint(1, 9))]
                    for _ in range(min(rng.randint(1, 2), 4 - len(rows)))
                ]
                # both prefills fill the slab: the model's own and the fused one
                if rng.random() < 0.5:
                    _, layers, valid = forward_suffixes(model, prompts, None, pad_id=0)
                else:
                    _, layers, valid = fused.prefill(prompts, None, pad_id=0)
                slab.append(layers, valid)
                rows += [list(p) for p in prompts]
            if not rows:
                continue
            cols = slab.cols
            mask, positions = slab.step_inputs()
            relayouts += slab.cols != cols
            ids = torch.tensor([[rng.randrange(3, 64)] for _ in rows])
            logits = fused.step(ids, positions, mask, slab)
            slab.advance()
            for row, token in zip(rows, ids[:, 0].tolist(), strict=True):
                row.append(token)
            for i, row in enumerate(rows):
                ref = model(input_ids=torch.tensor([row])).logits[0, -1]
                torch.testing.assert_close(logits[i], ref, atol=1e-5, rtol=1e-5)
            leaving = [i for i in range(len(rows)) if rng.random() < 0.1]
            for src, dst in slab.remove(leaving):
                rows[dst] = rows[src]
            del rows[slab.n :]
    assert relayouts >= 2  # the buffers grew while rows were live, more than once
