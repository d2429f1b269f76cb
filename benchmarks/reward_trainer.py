"""trl's Bradley-Terry reward model: a LoRA adapter and a scalar head trained on pairs of a
preferred and a rejected exchange (`RewardTrainer` on `AutoModelForSequenceClassification`,
one label). The MT-Bench benchmark's pairwise reward arm trains it
(`benchmarks/pairwise_reward.py`), and `benchmarks/judge_lora.py --reward-head` keeps it as
the demo's first reward-head arm, whose figures docs/benchmarks/judge-demo-labels.md records.
The night's reward-model judge is another thing: a logistic head on the judge model's frozen
features (`judges/reward_head.py`, measured by `benchmarks/judge_reward_head.py`).

For a pass/fail judge, the pairs are a passing and a failing exchange from the training
labels: every labelled exchange is in at least one pair, and with `injections` each failing
exchange is planted once more with an instruction to the judge, as `judges.lora_records`
plants them. An exchange is the request as the user's turn and the reply as the assistant's:
a reward model scores a reply, it is not asked a question. With a `memory`
(`judges.memory`) the reviewers' notes on the most alike requests come first, as the system
turn. The trainer and LoRA shape are the verdict-token adapter's (`weights.lora`: rank,
alpha, targets, rate, epochs, batch); the head is read as sigmoid(score), against a
threshold the benchmark calibrates.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Sequence

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
from trl import RewardConfig, RewardTrainer

from infra.settings import LoraSettings
from judges.injection import TRAINING, planted
from judges.memory import ReviewedMemory
from judges.types import JudgedItem
from weights.lora import target_modules, training_arguments, training_placement

Messages = list[dict[str, str]]


def exchange(request: str, reply: str) -> Messages:
    return [{"role": "user", "content": request}, {"role": "assistant", "content": reply}]


def item_exchange(item: JudgedItem, memory: ReviewedMemory | None = None) -> Messages:
    turns = exchange(item.input_text, item.output_text)
    return turns if memory is None else [{"role": "system", "content": memory.notes(item)}, *turns]


def reward_pairs(
    items: Sequence[JudgedItem], seed: int, injections: bool, memory: ReviewedMemory | None = None
) -> list[dict]:
    """(chosen: a passing exchange, rejected: a failing one), the larger side each once,
    the smaller cycled in a seeded order."""
    rng = random.Random(seed)
    passing = [i for i in items if i.human_pass is True]
    failing = [i for i in items if i.human_pass is False]
    if injections:
        failing += [planted(item, TRAINING, rng) for item in failing]
    if not passing or not failing:
        raise ValueError("a reward head needs passing and failing labels to pair")
    rng.shuffle(passing)
    rng.shuffle(failing)
    size = max(len(passing), len(failing))
    return [
        {
            "chosen": item_exchange(passing[n % len(passing)], memory),
            "rejected": item_exchange(failing[n % len(failing)], memory),
        }
        for n in range(size)
    ]


class RewardHead:
    """A trained reward head and its tokenizer, scoring exchanges in batches."""

    def __init__(self, model, tokenizer, seconds: float, steps: int, pairs: int):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.seconds, self.steps, self.pairs = seconds, steps, pairs

    @torch.no_grad()
    def scores(self, exchanges: Sequence[Messages], batch: int = 8) -> list[float]:
        """The head's raw score of each exchange, each read on its own."""
        out: list[float] = []
        for start in range(0, len(exchanges), batch):
            texts = [
                self.tokenizer.apply_chat_template(messages, tokenize=False)
                for messages in exchanges[start : start + batch]
            ]
            inputs = self.tokenizer(texts, return_tensors="pt", padding=True)
            out += self.model(**inputs).logits[:, 0].float().tolist()
        return out

    def p_pass(
        self, items: Sequence[JudgedItem], memory: ReviewedMemory | None = None
    ) -> list[float]:
        """sigmoid(score) per item, read as it trained: with the notes of its `memory`."""
        scores = self.scores([item_exchange(i, memory) for i in items])
        return torch.sigmoid(torch.tensor(scores)).tolist()


def train_reward_head(
    pairs: list[dict], base_model_path: str, cfg: LoraSettings, seed: int
) -> RewardHead:
    """trl's Bradley-Terry reward model on `pairs` ({"chosen": Messages, "rejected":
    Messages}): a LoRA adapter and a scalar head on the base model."""
    started = time.perf_counter()
    set_seed(seed)  # the head and the LoRA matrices are initialised here
    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    # the device as weights.lora chooses it; the base loads whole (no 4-bit here)
    placement = training_placement(cfg.model_copy(update={"quantize": "none"}))
    model = AutoModelForSequenceClassification.from_pretrained(
        base_model_path, num_labels=1, dtype=placement.dtype
    )
    model.config.pad_token_id = tokenizer.pad_token_id
    with tempfile.TemporaryDirectory(prefix="flywheel-reward-head-") as scratch:
        trainer = RewardTrainer(
            model=model,
            args=RewardConfig(
                learning_rate=cfg.learning_rate,
                max_length=cfg.max_seq_length,
                # on a CPU, as weights.lora: memory is ample, speed is not (a GPU's run
                # turns it back on: `training_arguments`' keys win)
                **(
                    {"activation_checkpointing": False}
                    | training_arguments(scratch, cfg, placement, seed, len(pairs))
                ),
            ),
            train_dataset=Dataset.from_list(pairs),
            processing_class=tokenizer,
            peft_config=LoraConfig(
                r=cfg.rank,
                lora_alpha=cfg.alpha,
                lora_dropout=cfg.dropout,
                target_modules=target_modules(model.config.model_type),
                task_type="SEQ_CLS",  # the score head trains whole beside the adapter
            ),
        )
        steps = trainer.train().global_step
    return RewardHead(trainer.model, tokenizer, time.perf_counter() - started, steps, len(pairs))
