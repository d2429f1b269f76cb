"""A weight step against an OpenAI-compatible server with runtime LoRA loading, as on vLLM:
training runs where the base checkpoint is, and the new adapter is hot-loaded into the
server (`POST /v1/load_lora_adapter`), which then serves it by name. The server is
flywheel's own (`infra/lm/engine/server.py`, vLLM's endpoints over the real local model),
reached in-process through the SDK client's transport."""

from __future__ import annotations

import httpx
import pytest

from infra.lm.engine.local import LocalLM
from infra.lm.engine.server import create_app
from infra.lm.openai_lm import OpenAILM
from infra.settings import LMSettings, LoraSettings
from infra.types import Example, Rollout
from weights.round import lora_round

pytestmark = pytest.mark.slow

TARGET = "zebra"  # what the judge here wants, and the base model never says


@pytest.fixture
def served():
    local = LocalLM(LMSettings(batch_wait_ms=2))
    app = create_app(local, "smollm2")
    settings = LMSettings(backend="openai", base_url="http://vllm.test/v1", model="smollm2")
    yield OpenAILM(settings, transport=httpx.ASGITransport(app=app)), local
    local.close()


def ask(example: Example) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": f"Name an animal ({example.inputs['n']})."},
    ]


async def test_a_weight_step_trains_on_the_checkpoint_and_hot_loads_into_the_server(
    served, tmp_path
):
    lm, local = served

    async def rollouts(examples, adapter, **params):
        """Sampled: the reply the judge wants, scored 1 (as a person's passed reply is).
        Greedy: the server's own reply with `adapter`, scored 1 if it says TARGET."""
        out = []
        for example in examples:
            if params:
                out.append(Rollout(example, {}, TARGET, ask(example), 1.0))
                continue
            reply = await lm.complete(ask(example), max_tokens=4, adapter=adapter)
            said = reply.text.strip().lower()
            out.append(Rollout(example, {}, reply.text, ask(example), float(TARGET in said)))
        return out

    train = [Example(f"t{i}", {"n": i}) for i in range(8)]
    val = [Example(f"v{i}", {"n": 100 + i}) for i in range(3)]
    cfg = LoraSettings(
        samples_per_example=1, batch_size=4, epochs=6, learning_rate=2e-3, max_seq_length=64
    )
    result = await lora_round(
        lm, rollouts, train, val, cfg, tmp_path / "n1", 0.5, seed=0, adapter_name="night-1"
    )

    assert lm.base_model_path == local.base_model_path  # the checkpoint the server serves
    # the end of training, or an earlier checkpoint the judge scored as high (early stop)
    assert result.trained_path.startswith(str(tmp_path / "n1" / "adapter"))
    assert "night-1" in await lm.adapters()  # loaded by the server at run time
    assert result.val_without == 0.0 and result.val_with == 1.0 and result.kept
