"""The local engine on a tiny random Qwen2 checkpoint: transformers' numbers, the same
bits alone and in a batch, choice scores, features, LoRA adapters and the server, with
the model's Linear weights released once packed; other architectures get a sentence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from peft import LoraConfig, PeftModel, get_peft_model
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    PretrainedConfig,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from infra.lm.engine import decode_attention
from infra.lm.engine.adapters import lora_deltas
from infra.lm.engine.architectures import UnsupportedModelError
from infra.lm.engine.batcher import Request
from infra.lm.engine.checkpoint_weights import CheckpointWeights
from infra.lm.engine.fused_decode import FusedDecoder, Prompt
from infra.lm.engine.local import LocalLM
from infra.lm.engine.server import create_app
from infra.settings import LMSettings
from tests.infra.lm.engine.test_fused_decode import last_logits, prefill_then_step

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
ASKS = [
    "hi",
    "What is 2+2? Answer with one number.",
    "Write a haiku about the sea, the moon and the stars above us all tonight, please.",
    "List three fruits.",
]
ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def tiny_qwen2_config(**overrides) -> Qwen2Config:
    # head_dim 32: an attention scale of 2**-2.5, not a power of two, as Qwen2's 128 is
    fields = dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=128,
        num_hidden_layers=2,
        vocab_size=300,
        tie_word_embeddings=True,
        eos_token_id=256,
    )
    return Qwen2Config(**(fields | overrides))


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """Bytes as tokens 0-255, then <|im_end|> (256), <|endoftext|>, <|im_start|>; ChatML."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML
    return fast


def save_checkpoint(model_class, config: PretrainedConfig, folder: Path, seed: int = 0) -> Path:
    """A random model with the byte tokenizer, saved as a transformers checkpoint."""
    torch.manual_seed(seed)
    model = model_class(config)
    with torch.no_grad():  # random biases: Qwen2's start at zero
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0, 0.5)
    model.save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder


def chat(ask: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": ask}]


def reference(folder: Path):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


@pytest.fixture(scope="module", params=[True, False], ids=["tied", "untied"])
def checkpoint(request, tmp_path_factory) -> Path:
    """Qwen2.5's small models tie the head to the embeddings; the 1.5B GGUF's does not."""
    config = tiny_qwen2_config(tie_word_embeddings=request.param)
    return save_checkpoint(Qwen2ForCausalLM, config, tmp_path_factory.mktemp("qwen2"))


@pytest.fixture(scope="module")
def adapter_dir(checkpoint, tmp_path_factory) -> Path:
    torch.manual_seed(3)
    config = LoraConfig(r=4, target_modules=ALL_PROJECTIONS, init_lora_weights=False)
    folder = tmp_path_factory.mktemp("adapter")
    get_peft_model(reference(checkpoint), config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def lm_in_each_dtype(request, checkpoint):
    local = LocalLM(LMSettings(model_path=str(checkpoint), dtype=request.param, batch_wait_ms=2))
    yield local
    local.close()


@pytest.fixture(scope="module")
def lm(checkpoint):
    local = LocalLM(LMSettings(model_path=str(checkpoint), dtype="float32", batch_wait_ms=2))
    yield local
    local.close()


def logprobs_of(model, prompt: list[int], tokens: list[int]) -> list[float]:
    """transformers' log-probability of each of `tokens` after `prompt` and its predecessors."""
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + tokens])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return [float(logp[len(prompt) - 1 + j, t]) for j, t in enumerate(tokens)]


def test_prefill_and_a_step_equal_the_model_forward():
    torch.manual_seed(0)
    config = tiny_qwen2_config(attn_implementation=decode_attention.NAME)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.normal_(0, 0.5)
    prompts = [[3 + i % 250 for i in range(70)], [3, 4], [10, 11, 12]]  # one spans two chunks
    prefilled, stepped = prefill_then_step(model, prompts, [1, 2, 3])
    for row, (prompt, token) in enumerate(zip(prompts, [1, 2, 3], strict=True)):
        torch.testing.assert_close(prefilled[row], last_logits(model, prompt), atol=1e-5, rtol=1e-5)
        ref = last_logits(model, prompt + [token])
        torch.testing.assert_close(stepped[row], ref, atol=1e-5, rtol=1e-5)


async def test_greedy_tokens_and_logprobs_are_transformers_own(lm, checkpoint):
    model = reference(checkpoint)
    for ask in ASKS:
        prompt = lm.prompt_ids(chat(ask))
        done = await lm.batcher.generate(Request(prompt, 8, want_logprobs=True))
        ref = logprobs_of(model, prompt, done.token_ids)
        assert done.logprobs == pytest.approx(ref, abs=1e-4)
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + done.token_ids])).logits[0, len(prompt) - 1 :]
        assert done.token_ids == logits[:-1].argmax(-1).tolist()  # greedy, step by step


async def test_alone_equals_a_batch_to_the_bit(lm_in_each_dtype):
    lm = lm_in_each_dtype

    async def run(ask: str, n: int):
        done = await lm.complete(chat(ask), max_tokens=n, logprobs=True)
        return done.text, done.token_logprobs

    lengths = [6, 12, 9, 4]
    alone = [await run(a, n) for a, n in zip(ASKS, lengths, strict=True)]
    together = await asyncio.gather(*(run(a, n) for a, n in zip(ASKS, lengths, strict=True)))
    assert list(together) == alone
    choices = ["Yes", "No", "Yes, it is"]
    scored = [await lm.choice_logprobs(chat(a), choices) for a in ASKS]
    assert list(await asyncio.gather(*(lm.choice_logprobs(chat(a), choices) for a in ASKS))) == (
        scored
    )
    features = [await lm.features(chat(a)) for a in ASKS]
    assert list(await asyncio.gather(*(lm.features(chat(a)) for a in ASKS))) == features
    assert lm.batcher.plan.checked and lm.batcher.plan.invariant, lm.describe()


async def test_choice_logprobs_are_exact(lm, checkpoint):
    model = reference(checkpoint)
    choices = ["4", "Four, of course.", "5"]
    scores = await lm.choice_logprobs(chat(ASKS[1]), choices)
    prompt = lm.prompt_ids(chat(ASKS[1]))
    for choice, score in zip(choices, scores, strict=True):
        answer = lm.tokenizer(choice, add_special_tokens=False).input_ids
        assert score == pytest.approx(sum(logprobs_of(model, prompt, answer)), abs=1e-4)


async def test_features_are_the_last_normed_hidden_state(lm, checkpoint):
    model = reference(checkpoint)
    for ask in ASKS:
        with torch.inference_mode():
            out = model(torch.tensor([lm.prompt_ids(chat(ask))]), output_hidden_states=True)
        ref = out.hidden_states[-1][0, -1]
        torch.testing.assert_close(
            torch.tensor(await lm.features(chat(ask))), ref, atol=1e-5, rtol=1e-4
        )
    calls = lm.tally.stage("other").calls
    await lm.features(chat(ASKS[0]) + [{"role": "user", "content": "and again?"}])
    assert lm.tally.stage("other").calls == calls + 1


async def test_a_prompt_read_again_is_kept_not_prefilled(lm, adapter_dir):
    """Bit for bit what a second prefill would give (the engine is batch-invariant), with
    no token read; a name loaded again with other weights forgets what the old ones read."""
    ask = chat("kept?")
    first_features, first_choices = await lm.features(ask), await lm.choice_logprobs(ask, ["a"])
    read = lm.tally.stage("other").prompt_tokens
    assert await lm.features(ask) == first_features
    assert await lm.choice_logprobs(ask, ["a"]) == first_choices
    assert lm.tally.stage("other").prompt_tokens == read and lm.readings.hits >= 2
    lm.readings.forget(None)  # nothing kept: the engine reads it again, to the same bits
    assert await lm.features(ask) == first_features
    assert lm.tally.stage("other").prompt_tokens > read
    await lm.load_adapter("again", adapter_dir)
    before = await lm.features(ask, "again")
    await lm.load_adapter("again", adapter_dir)  # a name loaded anew forgets its readings
    read = lm.tally.stage("other").prompt_tokens
    assert await lm.features(ask, "again") == before
    assert lm.tally.stage("other").prompt_tokens > read
    await lm.unload_adapter("again")


async def test_the_engine_holds_the_only_copy_of_the_linear_weights(lm):
    model = lm.batcher.model
    body = [m for m in model.model.modules() if isinstance(m, torch.nn.Linear)]
    assert body and all(m.weight.is_meta for m in body)
    if model.config.tie_word_embeddings:
        assert model.lm_head.weight is model.model.embed_tokens.weight  # kept: it is read
    else:
        assert model.lm_head.weight.is_meta
    assert lm.batcher.weights().scores is lm.batcher.weights().head  # float32: no other head


async def test_a_lora_adapter_gives_peft_s_merged_numbers(lm, checkpoint, adapter_dir):
    merged = PeftModel.from_pretrained(reference(checkpoint), adapter_dir).merge_and_unload()
    await lm.load_adapter("tuned", adapter_dir)
    prompt = lm.prompt_ids(chat(ASKS[2]))
    tuned = await lm.batcher.generate(Request(prompt, 8, want_logprobs=True, adapter="tuned"))
    assert tuned.logprobs == pytest.approx(logprobs_of(merged, prompt, tuned.token_ids), abs=1e-4)
    base = await lm.batcher.generate(Request(prompt, 8, want_logprobs=True))
    assert (tuned.token_ids, tuned.logprobs) != (base.token_ids, base.logprobs)
    assert all(
        m.weight.is_meta
        for m in lm.batcher.model.model.layers.modules()
        if isinstance(m, torch.nn.Linear)
    )
    with torch.inference_mode():
        ref = merged(torch.tensor([prompt]), output_hidden_states=True).hidden_states[-1][0, -1]
    torch.testing.assert_close(
        torch.tensor(await lm.features(chat(ASKS[2]), "tuned")), ref, atol=1e-5, rtol=1e-4
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weights_from_the_checkpoint_equal_the_model_s(checkpoint, adapter_dir, dtype):
    """Released and read back (packed, or used as they are where this CPU cannot pack the
    dtype), the base and the adapter's weights give the bits of the model kept whole."""
    kept, released = (
        AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype).eval() for _ in "ab"
    )
    deltas = lora_deltas(released, adapter_dir)
    from_files = FusedDecoder(released, CheckpointWeights.of(checkpoint, dtype))
    assert released.model.layers[0].mlp.up_proj.weight.is_meta
    in_memory = FusedDecoder(kept)
    pairs = [
        (from_files.base, in_memory.base),
        (from_files.weights(deltas), in_memory.weights(deltas)),
    ]
    prompt = [Prompt([258, 5, 77, 91, 12])]
    with torch.inference_mode():
        for ours, theirs in pairs:
            hidden = from_files.prefill(prompt, ours)[0]
            assert torch.equal(hidden, in_memory.prefill(prompt, theirs)[0])
            assert torch.equal(ours.scores(hidden.float()), theirs.scores(hidden.float()))


def test_an_adapter_that_trains_biases_is_refused(checkpoint, tmp_path):
    config = LoraConfig(r=2, target_modules=["q_proj"], bias="all")
    get_peft_model(reference(checkpoint), config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="trains biases"):
        lora_deltas(reference(checkpoint), tmp_path)


def test_the_server_serves_it_and_its_adapter(lm, adapter_dir):
    app = create_app(lm, "tiny-qwen2", adapters={"night-1": adapter_dir})
    with TestClient(app) as client:
        cards = client.get("/v1/models").json()["data"]
        assert ("night-1", "tiny-qwen2") in [(c["id"], c["parent"]) for c in cards]
        for model in ("tiny-qwen2", "night-1"):
            body = {"model": model, "messages": chat(ASKS[0]), "max_tokens": 3, "temperature": 0}
            answer = client.post("/v1/chat/completions", json=body | {"logprobs": True})
            assert answer.status_code == 200
            assert answer.json()["usage"]["completion_tokens"] >= 1


def test_other_architectures_get_a_sentence(tmp_path):
    gpt2 = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=300, n_positions=64)
    folder = save_checkpoint(GPT2LMHeadModel, gpt2, tmp_path / "gpt2")
    with pytest.raises(UnsupportedModelError, match="is a 'gpt2' model; the local engine runs"):
        LocalLM(LMSettings(model_path=str(folder)))


def test_a_sliding_window_shorter_than_the_context_is_refused(tmp_path):
    config = tiny_qwen2_config(use_sliding_window=True, sliding_window=16, max_window_layers=1)
    folder = save_checkpoint(Qwen2ForCausalLM, config, tmp_path / "sliding")
    with pytest.raises(UnsupportedModelError, match="attend only to the last 16"):
        LocalLM(LMSettings(model_path=str(folder)))
