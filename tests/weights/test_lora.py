import json
import math

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from infra.lm.model_files import resolve_model_path
from infra.settings import LoraSettings
from weights.adapters import adapter_files_ok
from weights.lora import (
    TRAINING_SUMMARY,
    NoRecordFits,
    checkpoints,
    train_dpo_adapter,
    train_grpo_adapter,
    train_sft_adapter,
)

pytestmark = pytest.mark.slow


def load_for_inference(base_model_path, adapter_path) -> PeftModel:
    base = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch.float32)
    return PeftModel.from_pretrained(base, str(adapter_path)).eval()


INTENTS = ["billing", "refund", "login", "shipping"]


def records() -> list[dict]:
    return [
        {
            "prompt": [
                {"role": "system", "content": "Answer with the intent only."},
                {"role": "user", "content": f"Message {i} about {intent}."},
            ],
            "completion": [{"role": "assistant", "content": intent}],
        }
        for i, intent in enumerate(INTENTS * 2)
    ]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = resolve_model_path()
    out = tmp_path_factory.mktemp("adapters") / "round-1"
    progress = []
    cfg = LoraSettings(batch_size=4, max_seq_length=64, learning_rate=1e-3)
    result = train_sft_adapter(
        records(), base, out, cfg, progress_callback=lambda *a: progress.append(a)
    )
    return base, result, progress


def test_training_reports_a_finite_loss_and_progress(trained):
    _, result, progress = trained
    assert result.steps == 2 and result.examples == 8
    assert math.isfinite(result.train_loss) and result.train_loss > 0
    assert [p[:2] for p in progress] == [(1, 2), (2, 2)]
    assert all({"loss", "learning_rate"} <= set(logs) for _, _, logs in progress)
    # the curve MLflow gets: what the trainer logged at each step, as the bar heard it
    assert [log["step"] for log in result.history] == [1, 2]
    assert [log["loss"] for log in result.history] == [logs["loss"] for _, _, logs in progress]


def test_adapter_is_saved_whole_with_tokenizer(trained):
    _, result, _ = trained
    assert adapter_files_ok(result.path)
    assert (result.path / "tokenizer.json").exists()
    assert not list(result.path.parent.glob(".*partial"))
    # its summary came with it, in the same rename: a resumed night can account for it
    summary = json.loads((result.path / TRAINING_SUMMARY).read_text())
    assert summary == result.to_json() and summary["steps"] == 2
    assert summary["device"] == result.device and result.device  # where it trained


def test_adapter_changes_the_logits(trained):
    base, result, _ = trained
    model = load_for_inference(base, result.path)
    ids = torch.tensor([[1, 9690, 198, 2683, 28, 253, 1035, 30]])
    with torch.no_grad():
        tuned = model(input_ids=ids).logits
        with model.disable_adapter():
            plain = model(input_ids=ids).logits
    assert (tuned - plain).abs().max() > 1e-3


def test_existing_output_is_never_overwritten(trained):
    base, result, _ = trained
    with pytest.raises(FileExistsError):
        train_sft_adapter(records(), base, result.path, LoraSettings())
    assert adapter_files_ok(result.path)


def test_training_continues_from_a_base_adapter(trained):
    base, result, _ = trained
    cfg = LoraSettings(batch_size=4, max_seq_length=64, learning_rate=1e-3)
    second = train_sft_adapter(
        records(), base, result.path.with_name("round-2"), cfg, base_adapter=result.path
    )
    first_model = load_for_inference(base, result.path)
    second_model = load_for_inference(base, second.path)
    name = next(n for n in first_model.state_dict() if "lora_B" in n)
    assert not torch.equal(first_model.state_dict()[name], second_model.state_dict()[name])


def test_a_save_killed_midway_leaves_nothing_a_rerun_trips_on(trained, tmp_path):
    """SIGKILL inside the save leaves only the hidden partial folder (the adapter appears
    by one rename, its summary inside): the rerun clears it and trains again."""
    base, _, _ = trained
    target = tmp_path / "adapter"
    partial = target.with_name(f".{target.name}.partial")
    partial.mkdir()
    (partial / "adapter_config.json").write_text("{half written")
    assert not target.exists()
    cfg = LoraSettings(batch_size=4, max_seq_length=64, learning_rate=1e-3)
    result = train_sft_adapter(records(), base, target, cfg)
    assert adapter_files_ok(result.path) and not partial.exists()
    assert json.loads((target / TRAINING_SUMMARY).read_text())["steps"] == result.steps


def preferences() -> list[dict]:
    return [
        {
            "prompt": record["prompt"],
            "chosen": record["completion"],
            "rejected": [{"role": "assistant", "content": "I cannot help with that."}],
        }
        for record in records()
    ]


def reply_logprob(model, tokenizer, prompt, reply) -> float:
    """log p(reply | prompt) under the chat template, summed over the reply's tokens."""

    def tokens(messages, **kwargs) -> list[int]:
        text = tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    start = tokens(prompt, add_generation_prompt=True)
    ids = tokens(prompt + reply)
    assert ids[: len(start)] == start
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
    logps = torch.log_softmax(logits.float(), -1)
    return sum(logps[t - 1, ids[t]].item() for t in range(len(start), len(ids)))


def preference_margin(model, tokenizer) -> float:
    return sum(
        reply_logprob(model, tokenizer, r["prompt"], r["chosen"])
        - reply_logprob(model, tokenizer, r["prompt"], r["rejected"])
        for r in preferences()
    )


def test_dpo_from_an_adapter_widens_its_preference_and_saves_only_itself(trained):
    base, sft, _ = trained
    cfg = LoraSettings(batch_size=4, max_seq_length=64, dpo_learning_rate=2e-3, epochs=3)
    dpo = train_dpo_adapter(
        preferences(), base, sft.path.with_name("dpo-1"), cfg, base_adapter=sft.path
    )
    assert dpo.steps == 6 and math.isfinite(dpo.train_loss) and adapter_files_ok(dpo.path)
    assert not (dpo.path / "ref").exists()  # trl's frozen reference copy stays behind
    tokenizer = AutoTokenizer.from_pretrained(base)
    before = preference_margin(load_for_inference(base, sft.path), tokenizer)
    after = preference_margin(load_for_inference(base, dpo.path), tokenizer)
    assert after > before + 1.0


def test_records_missing_a_field_are_named(trained):
    base, result, _ = trained
    broken = preferences()
    broken[2]["rejected"] = []
    with pytest.raises(ValueError, match="record 2: field 'rejected'"):
        train_dpo_adapter(broken, base, result.path.with_name("never"), LoraSettings())


def test_records_that_all_exceed_the_length_are_a_sentence_not_a_crash(trained, tmp_path):
    base, _, _ = trained
    short = LoraSettings(batch_size=4, max_seq_length=8)
    with pytest.raises(NoRecordFits, match=r"none of the 8 records fits lora.max_seq_length \(8"):
        train_sft_adapter(records(), base, tmp_path / "never", short)
    assert not (tmp_path / "never").exists()


def test_training_saves_earlier_adapters_for_early_stopping(tmp_path):
    base = resolve_model_path()
    cfg = LoraSettings(batch_size=4, max_seq_length=64, learning_rate=1e-3, checkpoints=2)
    result = train_sft_adapter(records(), base, tmp_path / "a", cfg)
    (halfway,) = checkpoints(result.path)
    assert halfway.name == "step-1" and adapter_files_ok(halfway)
    assert not (halfway / "ref").exists()  # only the trained adapter
    ids = torch.tensor([[1, 9690, 198, 2683, 28, 253, 1035, 30]])
    with torch.no_grad():
        early = load_for_inference(base, halfway)(input_ids=ids).logits
        end = load_for_inference(base, result.path)(input_ids=ids).logits
    assert (early - end).abs().max() > 1e-4  # one more step moved it


def test_grpo_trains_on_the_rewards_of_groups_it_samples(tmp_path):
    """trl's GRPOTrainer samples grpo_generations replies per prompt, hands them with the
    records' example_id to an async reward (on its own event loop), and trains on them."""
    base = resolve_model_path()
    prompts = [{"prompt": r["prompt"], "example_id": f"ex{i}"} for i, r in enumerate(records())]
    groups = []

    async def reward(prompts, completions, example_id, **_):
        groups.append(list(example_id))
        return [float(len(c[0]["content"])) for c in completions]  # differ: a signal

    cfg = LoraSettings(
        method="grpo", batch_size=4, grpo_generations=2, grpo_max_completion_tokens=8,
        grpo_learning_rate=1e-3, max_steps=2, checkpoints=1,
    )  # fmt: skip
    result = train_grpo_adapter(prompts, base, tmp_path / "grpo", cfg, reward)
    assert result.steps == 2 and adapter_files_ok(result.path)
    assert len(groups) == 2 and all(len(ids) == 4 for ids in groups)
    for ids in groups:  # each prompt's replies come as a whole group
        assert all(ids.count(example_id) == 2 for example_id in ids)
    ids = torch.tensor([[1, 9690, 198, 2683, 28, 253, 1035, 30]])
    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)(input_ids=ids)
        tuned = load_for_inference(base, result.path)(input_ids=ids)
    assert (plain.logits - tuned.logits).abs().max() > 1e-4  # the rewards moved it
