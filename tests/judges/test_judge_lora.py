"""The judge's LoRA step on a scripted model: which checkpoint is kept, when the rubric
stays alone, and how the adapter is served to every judgement."""

import math
from dataclasses import replace
from pathlib import Path

from infra.registry.mlflow_registry import Registry
from infra.scales import ScoreScale
from infra.settings import Settings
from judges.adapter import served_name
from judges.align import Alignment
from judges.choose import choose_judge
from judges.judge import Judge
from judges.judge_lora import judge_lora_step
from judges.splits import judge_splits
from judges.types import JudgedItem, LabelWindow
from judges.versions import ADAPTER_TAG, JUDGE_PRODUCTION, production_judge


class AdapterLM:
    """The base model and the adapter "coin" are coin flips; adapter "sharp" reads every
    reply right. Records what it was asked to serve and what each judgement ran on."""

    def __init__(self):
        self.served: dict[str, str] = {}  # name -> folder
        self.ran_on: list[str | None] = []
        self.asked: list[str] = []  # each judgement's user message

    async def adapters(self) -> list[str]:
        return list(self.served)

    async def load_adapter(self, name: str, path) -> None:
        self.served[name] = str(path)

    async def choice_logprobs(self, messages, choices, adapter=None) -> list[float]:
        self.ran_on.append(adapter)
        self.asked.append(messages[1]["content"])
        skill = (Path(self.served[adapter]) / "skill").read_text() if adapter else None
        good = "[good]" in messages[1]["content"]
        p = (0.9 if good else 0.1) if skill == "sharp" else 0.5
        return [math.log(p), math.log(1 - p)]


def labelled(n: int = 40) -> list[JudgedItem]:
    return [
        JudgedItem(f"t{i}", f"request {i}", f"reply {i} [{'good' if i % 3 else 'bad'}]", i % 3 > 0)
        for i in range(n)
    ]


BOOLEAN = ScoreScale("boolean")


def aligned(val_score: float, scale: ScoreScale = BOOLEAN) -> Alignment:
    rubric = Judge({"rubric": "Judge it."}, scale, 0.5, heldout={"kappa": 0.0})
    return Alignment(rubric, rubric, val_score, val_score, False, rubric.prompts, 10, {})


def trainer(tmp_path: Path, *names: str):
    """Training that "saved" one checkpoint folder per name, and records what it got."""
    got: list[list] = []

    async def train(records):
        got.append(records)
        folders = [tmp_path / name for name in names]
        for folder in folders:
            folder.mkdir(exist_ok=True)
            (folder / "skill").write_text(folder.name)
            (folder / "adapter_config.json").write_text("{}")  # the files of an adapter
            (folder / "adapter_model.safetensors").write_bytes(b"weights")
        return folders

    return train, got


async def test_the_checkpoint_that_agrees_best_on_validation_is_kept_and_measured(tmp_path):
    lm, items = AdapterLM(), labelled()
    train, val, heldout = judge_splits(items, 0.4, 0)
    fit, got = trainer(tmp_path, "coin", "sharp")
    read: list[int] = []
    alignment, step = await judge_lora_step(
        lm, aligned(0.0), train, val, heldout, fit, seed=0, done=read.append
    )
    assert read == [1, 1]  # each saved adapter, as it was read on the validation labels

    # balanced by label, each failing reply once more with an injection planted
    failing = sum(not i.human_pass for i in train)
    assert step.records == len(got[0]) == 2 * max(len(train) - failing, 2 * failing)
    assert step.checkpoints["sharp"] == 1.0 and step.checkpoints["coin"] < 1.0
    assert step.kept == str(tmp_path / "sharp")
    judge = alignment.judge
    assert judge.adapter == step.kept and judge.heldout["kappa"] == 1.0
    assert 0.1 < judge.threshold <= 0.9  # refitted on the adapter's probabilities
    # served under its folder's name, once, and read by the judge's metric
    assert lm.served[served_name(step.kept)] == step.kept
    lm.ran_on.clear()
    metric = judge.metric(lm)
    assert await metric.p_pass_many(heldout[:2]) == [
        0.9 if i.human_pass else 0.1 for i in heldout[:2]
    ]
    assert lm.ran_on == [served_name(step.kept)] * 2


async def test_no_checkpoint_better_than_the_rubric_keeps_the_rubric_alone(tmp_path):
    lm, items = AdapterLM(), labelled()
    train, val, heldout = judge_splits(items, 0.4, 0)
    fit, _ = trainer(tmp_path, "coin")
    before = aligned(0.3)
    alignment, step = await judge_lora_step(lm, before, train, val, heldout, fit, seed=0)
    assert step.kept is None and alignment is before and alignment.judge.adapter is None
    assert "the rubric stays alone" in step.note and step.best_val == 0.0


async def test_a_judge_on_another_scale_has_no_lora_step(tmp_path):
    fit, got = trainer(tmp_path, "sharp")
    stars = ScoreScale("numeric", minimum=1, maximum=5)
    alignment, step = await judge_lora_step(AdapterLM(), aligned(0.3, stars), [], [], [], fit, 0)
    assert got == [] and step.records == 0 and "pass/fail only" in step.note


async def test_the_gate_compares_rubric_plus_adapter_versions(tmp_path):
    """Night 1's judge is rubric plus adapter: registered together, the adapter in MLflow.
    Night 2 reloads it from there and re-measures it, adapter and all, against tonight's
    rubric alone on the same held-out labels, and keeps it."""
    lm, items = AdapterLM(), labelled()
    train, val, heldout = judge_splits(items, 0.4, 0)
    registry = Registry(Settings(state_dir=tmp_path / "state").mlflow)
    window = LabelWindow(len(items), None, None, None, None)
    fit, _ = trainer(tmp_path, "sharp")
    first, _ = await judge_lora_step(lm, aligned(0.0), train, val, heldout, fit, seed=0)
    night1 = await choose_judge(lm, registry, "n1", first, heldout, window, 0.2, 0)
    ((name, version),) = night1.registered.items()
    tags = registry.prompt_version_at_alias(name, JUDGE_PRODUCTION).tags
    assert night1.decision.passed and tags[ADAPTER_TAG].startswith("runs:/")

    lm.served.clear()  # a new night, a fresh model: nothing served yet
    rubric_alone = aligned(0.3)
    rubric_alone.judge = Judge({"rubric": "Judge it."}, heldout={"kappa": 0.3})
    folder = tmp_path / "night2"
    night2 = await choose_judge(
        lm, registry, "n2", rubric_alone, heldout, window, 0.2, 0, adapter_dir=folder
    )
    assert night2.kept_previous and night2.previous.heldout_score == 1.0
    assert night2.judge.adapter.startswith(str(folder))  # downloaded from MLflow
    assert (Path(night2.judge.adapter) / "skill").read_text() == "sharp"
    assert "0.30 < " in night2.decision.reason
    # read again the same night (the watch reads it too): no second download
    downloads = []
    download = registry.download
    registry.download = lambda uri, dst: downloads.append(uri) or download(uri, dst)
    again = production_judge(registry, ["rubric"], folder)
    assert again.adapter == night2.judge.adapter and downloads == []
    assert production_judge(registry, ["rubric"], tmp_path / "elsewhere").adapter
    assert len(downloads) == 1


def test_an_adapter_is_loaded_once_however_many_judgements_ask_at_once(tmp_path):
    """Many judgements start together on a fresh model, night after night (each night its
    own event loop): the adapter is loaded once, and no lock outlives its loop."""
    import asyncio

    from judges.pointwise import PointwiseJudge

    folder = tmp_path / "sharp"
    folder.mkdir()
    (folder / "skill").write_text("sharp")
    lm, loads = AdapterLM(), []
    load = lm.load_adapter

    async def slow_load(name, path):
        loads.append(name)
        await asyncio.sleep(0.01)  # the other judgements arrive meanwhile
        await load(name, path)

    lm.load_adapter = slow_load
    batch = labelled(8)
    for _ in range(2):
        judges = [PointwiseJudge(lm, {"rubric": "r"}, adapter=str(folder)) for _ in range(4)]

        async def night(judges=judges):
            return await asyncio.gather(*(j.p_pass_many(batch) for j in judges))

        results = asyncio.run(night())
        assert all(probs == results[0] for probs in results)
        lm.served.clear()  # the model restarted between nights
    assert loads == [served_name(folder)] * 2


async def test_the_annotators_comments_reach_the_records_only_when_asked(tmp_path):
    items = [replace(i, human_comment=f"because {i.id}") for i in labelled()]
    train, val, heldout = judge_splits(items, 0.4, 0)
    for comments in (False, True):
        (tmp_path / str(comments)).mkdir()
        fit, got = trainer(tmp_path / str(comments), "sharp")
        await judge_lora_step(
            AdapterLM(), aligned(0.0), train, val, heldout, fit, 0, True, comments
        )
        said = {r["completion"][0]["content"] for r in got[0]}
        with_reason = {s for s in said if s.startswith(("Yes. because", "No. because"))}
        assert bool(with_reason) == comments
        assert {s.split(".")[0] for s in said} == {"Yes", "No"}  # the verdict still leads


async def test_a_judge_with_a_memory_trains_on_its_notes_and_keeps_them_with_its_adapter(
    tmp_path,
):
    """The records and every judgement of the kept judge read the notes on alike training
    labels; the notes are saved in the adapter's folder, so the version registered in
    MLflow and reloaded on the next night judges with the same prompt."""
    from judges.memory import FILE, INTRO

    lm = AdapterLM()
    items = [replace(i, human_comment=f"note on {i.id}") for i in labelled()]
    train, val, heldout = judge_splits(items, 0.4, 0)
    fit, got = trainer(tmp_path, "coin", "sharp")
    alignment, step = await judge_lora_step(
        lm, aligned(0.0), train, val, heldout, fit, seed=0, memory=2
    )
    assert all(r["prompt"][1]["content"].count("note on t") == 2 for r in got[0])
    kept = alignment.judge.adapter
    assert kept == str(tmp_path / "sharp") and (tmp_path / "coin" / FILE).is_file()
    lm.asked.clear()
    await alignment.judge.metric(lm).p_pass_many(heldout[:3])
    tonight = list(lm.asked)
    assert all(INTRO in text and text.count("note on t") == 2 for text in tonight)

    registry = Registry(Settings(state_dir=tmp_path / "state").mlflow)
    window = LabelWindow(len(items), None, None, None, None)
    await choose_judge(lm, registry, "n1", alignment, heldout, window, 0.2, 0)
    reloaded = production_judge(registry, ["rubric"], tmp_path / "night2")
    assert reloaded.adapter != kept
    lm.asked.clear()
    await reloaded.metric(lm).p_pass_many(heldout[:3])
    assert lm.asked == tonight


async def test_mismatched_replies_reach_the_records_only_when_asked(tmp_path):
    train, val, heldout = judge_splits(labelled(), 0.4, 0)
    passing = {i.output_text for i in train if i.human_pass}
    for mismatched in (False, True):
        (tmp_path / str(mismatched)).mkdir()
        fit, got = trainer(tmp_path / str(mismatched), "sharp")
        await judge_lora_step(
            AdapterLM(), aligned(0.0), train, val, heldout, fit, 0, mismatched=mismatched
        )
        failing_with_a_passing_reply = [
            r
            for r in got[0]
            if r["completion"][0]["content"] == "No"
            and any(f"<reply>\n{reply}\n" in r["prompt"][1]["content"] for reply in passing)
        ]
        assert bool(failing_with_a_passing_reply) == mismatched


class OverfitLM(AdapterLM):
    """Its adapter "overfit" is sure of the exchanges it trained on, and right but unsure on
    the others: P(pass) 0.45 for a good reply, 0.30 for a bad one."""

    def __init__(self, trained: list[JudgedItem]):
        super().__init__()
        self.trained = {f"<request>\n{i.input_text}\n</request>" for i in trained}

    async def choice_logprobs(self, messages, choices, adapter=None) -> list[float]:
        if adapter is None:
            return await super().choice_logprobs(messages, choices, adapter)
        text = messages[1]["content"]
        good, seen = "[good]" in text, any(request in text for request in self.trained)
        p = (0.99 if good else 0.01) if seen else (0.45 if good else 0.30)
        return [math.log(p), math.log(1 - p)]


async def test_an_adapters_threshold_is_calibrated_on_the_validation_labels_too(tmp_path):
    """On its training labels alone an adapter's P(pass) sits near 0 and 1, so the cut
    could land anywhere between (here at 0.5, failing every unseen reply); with the
    validation labels it lands where unseen replies separate."""
    items = labelled()
    train, val, heldout = judge_splits(items, 0.4, 0)
    lm = OverfitLM(train)
    fit, _ = trainer(tmp_path, "overfit")
    alignment, step = await judge_lora_step(lm, aligned(0.0), train, val, heldout, fit, seed=0)
    assert 0.30 < alignment.judge.threshold < 0.45
    assert step.checkpoints["overfit"] == 1.0 and alignment.judge.heldout["kappa"] == 1.0


async def test_no_training_or_validation_labels_skip_the_step_without_training(tmp_path):
    """trl raises on an empty training set: a night with no labels skips the step."""
    fit, got = trainer(tmp_path, "sharp")
    before = aligned(math.nan)
    for train, val in (([], []), (labelled(3), [])):
        alignment, step = await judge_lora_step(AdapterLM(), before, train, val, [], fit, 0)
        assert got == [] and alignment is before and step.records == 0
        assert step.note == f"{len(train)} training and 0 validation labels: too few to train on"
