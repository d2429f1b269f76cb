"""LoRA goes on every linear layer of a block whatever the architecture: one SFT step on a
tiny random checkpoint of each common family (the embedded agent's tokenizer, a few
thousand weights besides its embeddings), then the saved adapter is read back."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from infra.lm.model_files import resolve_model_path
from infra.settings import LoraSettings
from weights import lora
from weights.lora import TRAINING_SUMMARY, lora_config, target_modules, train_sft_adapter

SEPARATE = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
LAYERS = 2


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_model_path())


def tiny_config(model_type: str, vocab_size: int, **extra) -> AutoConfig:
    return AutoConfig.for_model(
        model_type,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,  # gemma's default is 256, whatever the hidden size
        vocab_size=vocab_size,
        max_position_embeddings=256,
        **extra,
    )


def tiny_checkpoint(folder, model_type: str, tokenizer) -> str:
    """A random `model_type` model small enough to train in a second, saved with the
    tokenizer (and so its chat template) as a base checkpoint is."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config(model_type, len(tokenizer)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def records() -> list[dict]:
    return [
        {
            "prompt": [{"role": "user", "content": f"Message {i} about billing."}],
            "completion": [{"role": "assistant", "content": "billing"}],
        }
        for i in range(4)
    ]


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "mistral", "gemma"])
def test_one_sft_step_puts_lora_on_every_block_s_projections(tmp_path, tokenizer, model_type):
    base = tiny_checkpoint(tmp_path / "base", model_type, tokenizer)
    cfg = LoraSettings(batch_size=4, max_steps=1, checkpoints=1, max_seq_length=64)
    result = train_sft_adapter(records(), base, tmp_path / "adapter", cfg)

    assert result.steps == 1
    adapter = json.loads((result.path / "adapter_config.json").read_text())
    assert set(adapter["target_modules"]) == SEPARATE
    weights = load_file(result.path / "adapter_model.safetensors")
    for layer in range(LAYERS):
        for module in ("self_attn.q_proj", "mlp.down_proj"):
            for matrix in ("lora_A", "lora_B"):
                name = f"base_model.model.model.layers.{layer}.{module}.{matrix}.weight"
                assert name in weights, f"{name} not among {sorted(weights)[:4]}..."
    where = "cuda:0 (" if torch.cuda.is_available() else "cpu ("
    assert result.device.startswith(where)
    assert json.loads((result.path / TRAINING_SUMMARY).read_text())["device"] == result.device


def test_the_table_names_each_family_s_layers_and_others_get_all_linear():
    assert set(target_modules("qwen3")) == set(target_modules("gemma3_text")) == SEPARATE
    assert target_modules("phi3") == ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
    assert target_modules("gpt_neox") == "all-linear"


@pytest.mark.parametrize(
    "model_type, extra",
    [
        ("qwen3", {}),
        ("gemma3_text", {}),
        ("phi3", {"pad_token_id": 0}),
        ("gpt_neox", {}),  # not in the table: peft finds its linear layers by type
    ],
)
def test_lora_can_be_placed_on_each_architecture(tmp_path, model_type, extra):
    """Only the architecture's config is needed: placement is tried on a weightless copy."""
    tiny_config(model_type, 512, **extra).save_pretrained(tmp_path)
    peft_config = lora_config(LoraSettings(), tmp_path)
    assert peft_config.target_modules == (
        set(target_modules(model_type)) if model_type != "gpt_neox" else "all-linear"
    )


def test_a_model_lora_cannot_be_placed_on_is_a_sentence(tmp_path, monkeypatch):
    monkeypatch.setitem(lora.TARGET_MODULES, "llama", ("no_such_proj",))
    tiny_config("llama", 512).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=rf"model_type 'llama' of {tmp_path} \(Target modules"):
        lora_config(LoraSettings(), tmp_path)
