"""The LoRA round on fakes: judged rollouts as a function, a model that serves adapters."""

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pytest
from pydantic import ValidationError

from infra.settings import LoraSettings
from infra.types import Example, Rollout
from weights import round as weight_round
from weights.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from weights.lora import CHECKPOINTS, TRAINING_SUMMARY, AdapterResult

PRODUCTION = weight_round.ServedAdapter("production-v2", "/runs/n0/production/adapter")


class AdapterModel:
    """Serves adapters by name; `refuse` makes loading fail like a server without LoRA."""

    base_model_path = "/models/base"

    def __init__(self, refuse: bool = False):
        self.loaded: dict[str, str] = {}
        self.unloaded: list[str] = []
        self.refuse = refuse

    async def load_adapter(self, name, path):
        if self.refuse:
            raise RuntimeError("404 Not Found")
        self.loaded[name] = str(path)

    async def adapters(self):
        return list(self.loaded)

    async def unload_adapter(self, name):
        self.unloaded.append(name)
        self.loaded.pop(name, None)


def examples(n: int, prefix: str) -> list[Example]:
    return [Example(f"{prefix}{i}", {"request": f"play song {i}"}) for i in range(n)]


def judged(with_adapter: float, sampled: float = 0.9):
    """Rollouts scored `sampled` when sampled; greedy: 0.5 on the base model, 0.55 with the
    adapter in production, `with_adapter` with tonight's."""
    calls = []

    async def rollouts(batch, adapter, **params):
        calls.append((len(batch), adapter, params))
        greedy = {None: 0.5, PRODUCTION.name: 0.55}
        score = sampled if params else greedy.get(adapter, with_adapter)
        ask = [{"role": "user", "content": "play a song"}]
        return [Rollout(ex, {}, f"reply to {ex.id}", ask, score) for ex in batch]

    rollouts.calls = calls
    return rollouts


class Trained(NamedTuple):
    kind: str
    records: int
    base: str
    seed: int
    base_adapter: str | None


class TrainedRuns(list):
    rewards: list[list[float | None]]


@pytest.fixture
def trained(monkeypatch) -> TrainedRuns:
    """Training replaced by writing a whole adapter folder; records what it was given."""
    runs = TrainedRuns()

    def trainer(kind):
        def train(records, base, target, cfg, seed=0, base_adapter=None, reward=None):
            runs.append(Trained(kind, len(records), base, seed, base_adapter))
            if reward is not None:  # as trl does: a group per record, on a loop of its own
                group = [r for r in records for _ in range(cfg.grpo_generations)]
                completions = [
                    [{"role": "assistant", "content": "play " * k}] for k in range(len(group))
                ]
                ids = [r["example_id"] for r in group]
                rewards.append(
                    asyncio.run(reward([r["prompt"] for r in group], completions, example_id=ids))
                )
            for folder in [target] + [
                target / CHECKPOINTS / f"step-{n}" for n in range(1, cfg.checkpoints)
            ]:  # the end, and the earlier adapters training saved
                folder.mkdir(parents=True)
                (folder / ADAPTER_CONFIG).write_text(json.dumps({"peft_type": "LORA"}))
                (folder / ADAPTER_WEIGHTS).write_bytes(b"weights")
            history = tuple({"step": float(n), "loss": 2.0 / n} for n in (1, 2, 3))
            result = AdapterResult(target, 1.25, 3, len(records), 0.1, "cpu (float32)", history)
            (target / TRAINING_SUMMARY).write_text(json.dumps(result.to_json()))
            return result

        return train

    monkeypatch.setattr(weight_round, "train_sft_adapter", trainer("sft"))
    monkeypatch.setattr(weight_round, "train_dpo_adapter", trainer("dpo"))
    monkeypatch.setattr(weight_round, "train_grpo_adapter", trainer("grpo"))
    runs.rewards = rewards = []  # what each GRPO run's reward function returned
    return runs


async def run(
    lm, rollouts, tmp_path: Path, base=None, judge_replies=None, human=None, **cfg
) -> weight_round.LoraRound:
    settings = LoraSettings(samples_per_example=2, **({"checkpoints": 1} | cfg))
    return await weight_round.lora_round(
        lm,
        rollouts,
        examples(6, "t"),
        examples(3, "v"),
        settings,
        tmp_path / "n1",
        0.6,
        seed=3,
        base=base,
        judge_replies=judge_replies,
        human=human,
    )


async def test_an_adapter_the_judge_prefers_is_trained_served_and_kept(tmp_path, trained):
    lm, rollouts = AdapterModel(), judged(with_adapter=0.7)
    result = await run(lm, rollouts, tmp_path)
    assert result.kept and result.adapter_path == str(tmp_path / "n1" / "adapter")
    assert (result.val_without, result.train_loss) == (0.5, 1.25)
    assert result.val_with == pytest.approx(0.7)
    assert trained == [Trained("sft", result.records, "/models/base", 3, None)]
    assert 0 < result.records <= 6
    assert lm.loaded == {"adapter-n1": str(tmp_path / "n1" / "adapter")}
    sampled = [params for _, adapter, params in rollouts.calls if params]
    assert sampled == [{"temperature": 0.8, "seed": k, "judged": True} for k in range(2)]


async def test_models_training_does_not_call_rest_once_the_samples_are_judged(tmp_path, trained):
    rollouts = judged(with_adapter=0.7)

    async def rest() -> None:  # what the night passes: its teacher lets go of its weights
        trained.append("rested, after sampling" if rollouts.calls else "rested too early")

    settings = LoraSettings(samples_per_example=2, checkpoints=1)
    lm = AdapterModel()
    args = (lm, rollouts, examples(6, "t"), examples(3, "v"), settings, tmp_path / "n1", 0.6)
    await weight_round.lora_round(*args, seed=3, before_training=rest)
    assert trained[0] == "rested, after sampling" and trained[1].kind == "sft"
    assert len(trained) == 2


async def test_an_adapter_the_judge_does_not_prefer_is_measured_but_not_kept(tmp_path, trained):
    result = await run(AdapterModel(), judged(with_adapter=0.4), tmp_path)
    assert not result.kept and result.adapter_path is None
    assert result.trained_path and result.val_with == pytest.approx(0.4)
    assert "the judge preferred the base model on the Pareto set" in result.note


async def test_nothing_above_the_cut_trains_nothing(tmp_path, trained):
    result = await run(AdapterModel(), judged(0.7, sampled=0.5), tmp_path, min_judge_score=0.55)
    assert (
        result.records == 0
        and trained == []
        and result.note == "no label said what to reply, and no rollout passed the judge"
    )


async def test_switched_off_or_without_adapters_only_measures_the_base(tmp_path, trained):
    off = await run(AdapterModel(), judged(0.7), tmp_path, enabled=False)
    assert (off.val_without, off.note) == (0.5, "disabled in settings")

    class PlainModel:
        async def complete(self, messages, **params): ...

    plain = await run(PlainModel(), judged(0.7), tmp_path)
    assert plain.note == "PlainModel does not serve LoRA adapters" and trained == []


async def test_a_server_that_cannot_load_it_is_said_and_costs_the_night_nothing(tmp_path, trained):
    result = await run(AdapterModel(refuse=True), judged(0.7), tmp_path)
    assert not result.kept and result.trained_path is None and len(trained) == 1
    assert "could not load it (404 Not Found)" in result.note


async def test_a_resumed_round_reuses_the_adapter_it_finished(tmp_path, trained):
    first = await run(AdapterModel(), judged(0.7), tmp_path)
    again = await run(AdapterModel(), judged(0.7), tmp_path)  # a crash came after training
    assert len(trained) == 1 and again.train_loss == first.train_loss and again.kept
    assert again.train_device == first.train_device == "cpu (float32)"  # its training.json's


async def test_a_night_builds_on_the_adapter_in_production(tmp_path, trained):
    lm, rollouts = AdapterModel(), judged(with_adapter=0.7)
    result = await run(lm, rollouts, tmp_path, base=PRODUCTION)
    # sampled with production's adapter, compared against it, trained on from it
    assert {adapter for _, adapter, params in rollouts.calls if params} == {"production-v2"}
    assert rollouts.calls[0][:2] == (3, "production-v2") and result.val_without == 0.55
    assert trained[0].base_adapter == PRODUCTION.path
    assert result.base_adapter == PRODUCTION.name and result.trained_from == PRODUCTION.path
    assert result.kept and lm.loaded == {"adapter-n1": str(tmp_path / "n1" / "adapter")}


async def test_training_from_scratch_still_has_to_beat_production(tmp_path, trained):
    lm, rollouts = AdapterModel(), judged(with_adapter=0.4)
    result = await run(lm, rollouts, tmp_path, base=PRODUCTION, continue_from_production=False)
    assert trained[0].base_adapter is None and not result.kept and result.trained_from is None
    assert "the adapter in production (production-v2)" in result.note


def spread(with_adapter: float, good: str = "playing it"):
    """Like `judged`, but the first sample of each example scores 0.9 and the second 0.2,
    with a different reply: one preference pair per example."""
    greedy = judged(with_adapter)

    async def rollouts(batch, adapter, **params):
        if not params:
            return await greedy(batch, adapter)
        ask = [{"role": "user", "content": "play a song"}]
        score, reply = (0.9, good) if params["seed"] == 0 else (0.2, "no")
        return [Rollout(ex, {}, f"{reply} ({ex.id})", ask, score) for ex in batch]

    return rollouts


async def test_dpo_trains_on_best_against_worst_pairs(tmp_path, trained):
    result = await run(AdapterModel(), spread(0.7), tmp_path, method="dpo")
    assert trained == [Trained("dpo", 6, "/models/base", 3, None)] and result.kept
    assert result.records == 6 and result.adapter_path == str(tmp_path / "n1" / "adapter")


async def test_sft_then_dpo_goes_on_from_the_sft_adapter(tmp_path, trained):
    result = await run(AdapterModel(), spread(0.7), tmp_path, method="sft+dpo")
    sft_dir = str(tmp_path / "n1" / "adapter-sft")
    assert [(t.kind, t.base_adapter) for t in trained] == [("sft", None), ("dpo", sft_dir)]
    # one training curve: DPO's steps numbered on from SFT's
    assert [(log["step"], log["loss"]) for log in result.history] == [
        (step, 2.0 / n) for step, n in zip(range(1, 7), (1, 2, 3) * 2, strict=True)
    ]
    assert result.val_curve == ((0, 0.5), (6, pytest.approx(0.7)))
    assert result.adapter_path == str(tmp_path / "n1" / "adapter")
    sets = [Path(p) for p in result.training_sets]
    assert [p.name for p in sets] == ["sft.jsonl", "dpo.jsonl"]
    pairs = [json.loads(line) for line in sets[1].read_text().splitlines()]
    assert len(pairs) == 6 and pairs[0]["chosen"][0]["content"].startswith("playing it")
    written = [p.read_text() for p in sets]
    # a resumed round samples anew, trains neither stage again, and keeps the records
    # those adapters were trained on
    again = await run(AdapterModel(), spread(0.7, good="sure"), tmp_path, method="sft+dpo")
    assert len(trained) == 2 and again.kept
    assert [Path(p).read_text() for p in again.training_sets] == written


async def test_dpo_without_a_pair_over_the_margin_trains_nothing_and_says_why(tmp_path, trained):
    result = await run(AdapterModel(), judged(0.7), tmp_path, method="dpo")  # samples tie
    assert trained == [] and "dpo_margin (0.3)" in result.note
    both = await run(AdapterModel(), judged(0.7), tmp_path, method="sft+dpo")
    assert [t.kind for t in trained] == ["sft"] and "dpo_margin" in both.note


def test_replies_people_passed_come_first_and_ones_they_failed_are_rejected():
    ask = [{"role": "user", "content": "play a song"}]
    samples = [
        Rollout(ex, {}, f"sample {k} of {ex.id}", ask, score)
        for ex in examples(2, "t")
        for k, score in ((0, 0.7), (1, 0.5))
    ]
    human = {
        "t0": [("the reply a person passed", 1.0)],
        "t1": [("the reply a person failed", 0.0)],
        "h9": [("a held-out trace's reply", 1.0)],  # never sampled: it cannot train
    }
    labelled = weight_round.human_rollouts(samples, human)
    assert len(labelled) == 2
    cfg = LoraSettings(method="sft+dpo", dpo_margin=0.3)
    (_, sft), (_, dpo) = weight_round.training_sets(samples, 0.6, cfg, 0, labelled)[0]
    replies = [r["completion"][0]["content"] for r in sft]
    # t0 has a reply people gave: the judge's samples of it do not train
    assert replies == ["the reply a person passed", "sample 0 of t1"]
    pairs = {r["chosen"][0]["content"]: r["rejected"][0]["content"] for r in dpo}
    assert pairs == {"sample 0 of t1": "the reply a person failed"}


def test_every_label_target_trains_before_the_cap_and_corrections_pair_with_their_reply():
    """max_train_examples caps the judge's samples, never what people said; a correction
    is DPO's chosen against the reply it corrects."""
    ask = [{"role": "user", "content": "play a song"}]
    people, traffic = examples(6, "p"), examples(4, "t")
    samples = [Rollout(ex, {}, f"sample of {ex.id}", ask, 0.9) for ex in people + traffic]
    human = {ex.id: [(f"right reply to {ex.id}", 1.0)] for ex in people[:4]}
    human |= {ex.id: [(f"corrected {ex.id}", 1.0), (f"logged {ex.id}", 0.0)] for ex in people[4:]}
    labelled = weight_round.human_rollouts(samples, human)
    cfg = LoraSettings(method="sft+dpo", max_train_examples=2)
    (_, sft), (_, dpo) = weight_round.training_sets(samples, 0.6, cfg, 0, labelled)[0]
    replies = [r["completion"][0]["content"] for r in sft]
    assert set(replies[:6]) == {
        *(f"right reply to p{i}" for i in range(4)),
        "corrected p4",
        "corrected p5",
    }
    assert len(replies) == 8 and all(r.startswith("sample of t") for r in replies[6:])
    pairs = {r["chosen"][0]["content"]: r["rejected"][0]["content"] for r in dpo}
    assert pairs["corrected p4"] == "logged p4" and pairs["corrected p5"] == "logged p5"


async def test_without_judged_rollouts_the_step_learns_from_labels_alone(tmp_path, trained):
    """judged_rollouts off: the samples only give each example's chat, nothing judges
    them, and the records are people's replies alone."""
    rollouts = judged(with_adapter=0.7)
    human = {"t0": [("the right reply", 1.0)], "t1": [("fixed", 1.0), ("broken", 0.0)]}
    result = await run(
        AdapterModel(), rollouts, tmp_path, judged_rollouts=False, human=human, method="sft"
    )
    sampled = [params for _, _, params in rollouts.calls if "seed" in params]
    assert sampled and all(params["judged"] is False for params in sampled)
    assert [t.kind for t in trained] == ["sft"] and trained[0].records == 2
    assert result.records == 2


async def test_an_earlier_checkpoint_the_judge_prefers_is_kept_and_served(tmp_path, trained):
    """Early stopping: training saved step-1 and step-2 before its end; the judge scores
    step-1 best on the Pareto set, so it goes on, under the round's name."""
    lm, greedy = AdapterModel(), judged(with_adapter=0.6)

    async def rollouts(batch, adapter, **params):
        out = await greedy(batch, adapter, **params)
        if adapter == "adapter-n1-step-1":
            out = [replace(r, score=0.8) for r in out]
        return out

    result = await run(lm, rollouts, tmp_path, checkpoints=3)
    step1 = str(tmp_path / "n1" / "adapter" / CHECKPOINTS / "step-1")
    assert result.kept and result.trained_path == step1 and result.val_with == pytest.approx(0.8)
    assert lm.loaded == {"adapter-n1": step1}  # the round's name serves the one kept
    assert lm.unloaded == ["adapter-n1-step-1", "adapter-n1-step-2"]  # the trials, freed
    assert "stopped early: the judge scored step-1 0.800" in result.note
    # the score where training started and at each adapter it saved, by optimizer step
    steps, scores = zip(*result.val_curve, strict=True)
    assert steps == (0, 1, 2, 3) and scores == pytest.approx((0.5, 0.8, 0.6, 0.6))
    scored = {adapter for _, adapter, params in greedy.calls if not params}
    assert scored == {None, "adapter-n1", "adapter-n1-step-1", "adapter-n1-step-2"}


class ReplyJudge:
    """Scores a reply by its length, failing on empty ones; notes the loop it ran on."""

    def __init__(self):
        self.loops, self.judged = [], []

    async def __call__(self, replies):
        self.loops.append(asyncio.get_running_loop())
        self.judged.extend((r.example.id, r.output, r.messages) for r in replies)
        return [len(r.output) / 100 if r.output else None for r in replies]


async def test_grpo_samples_prompts_once_and_its_replies_are_judged_on_the_nights_loop(
    tmp_path, trained
):
    judge, rollouts = ReplyJudge(), judged(with_adapter=0.7)
    result = await run(
        AdapterModel(), rollouts, tmp_path, judge_replies=judge, method="grpo",
        grpo_generations=2, max_train_examples=4,
    )  # fmt: skip
    assert trained == [Trained("grpo", 4, "/models/base", 3, None)] and result.kept
    assert [p for _, _, p in rollouts.calls if p] == [
        {"temperature": 0.8, "seed": 0, "judged": True}
    ]
    assert judge.loops == [asyncio.get_running_loop()]  # not trl's: the batcher lives here
    (rewards,) = trained.rewards
    assert rewards == [None] + [len("play " * k) / 100 for k in range(1, 8)]
    first = judge.judged[2]  # a reply is judged as a rollout of its record's example
    assert first[0].startswith("t") and first[1] == "play play " and first[2][0]["role"] == "user"
    assert (result.train_steps, result.train_seconds) == (3, 0.1)
    assert result.train_device == "cpu (float32)"  # for the report's line on the round
    records = (tmp_path / "n1" / "training" / "grpo.jsonl").read_text().splitlines()
    assert {json.loads(r)["example_id"] for r in records} < {f"t{i}" for i in range(6)}


async def test_sft_then_grpo_goes_on_from_the_sft_adapter(tmp_path, trained):
    result = await run(
        AdapterModel(), judged(0.7), tmp_path, judge_replies=ReplyJudge(), method="sft+grpo",
        grpo_generations=2,
    )  # fmt: skip
    assert [t.kind for t in trained] == ["sft", "grpo"]
    assert trained[1].base_adapter == str(tmp_path / "n1" / "adapter-sft")
    assert result.train_steps == 6 and result.adapter_path == str(tmp_path / "n1" / "adapter")


async def test_grpo_without_a_judge_for_its_replies_is_refused(tmp_path, trained):
    with pytest.raises(ValueError, match="lora.method 'grpo' needs a judge"):
        await run(AdapterModel(), judged(0.7), tmp_path, method="grpo")
    assert trained == []


def test_grpo_groups_must_fill_each_optimizer_step():
    with pytest.raises(ValidationError, match=r"lora.batch_size \(8\) must be a multiple of"):
        LoraSettings(method="sft+grpo", grpo_generations=3)
    assert LoraSettings(method="sft", grpo_generations=3).batch_size == 8  # unused there
