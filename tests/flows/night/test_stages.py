"""The night's stages on a Runtime built with fakes: a scripted LM and an in-memory source."""

import json
import math
from datetime import UTC, datetime

import pytest

from flows.night import stages
from flows.night.collect import in_heldout_slice, summarize
from flows.night.runtime import Runtime
from flows.nightly import collect_traces, read_production
from flows.report.progress import StageProgress
from infra.scales import ScoreScale
from infra.settings import Settings
from infra.traces import Annotation, TraceBatch, TraceRecord
from infra.types import Example
from judges.align import fit_for
from judges.judge import Judge
from judges.judged_text import DATA_NOTE
from judges.pass_fail_fit import PassFailFit
from judges.pointwise import PointwiseJudge
from judges.scaled_fit import ScaledFit
from judges.scaled_metric import ScaledMetric, UnrankedScale
from tests.fakes import ScriptedLM

STARS = ScoreScale("numeric", minimum=1, maximum=5, name="stars")
NOW = datetime(2026, 11, 30, tzinfo=UTC)


class MemorySource:
    """A trace source holding one batch; it has no score configs."""

    def __init__(self, batch: TraceBatch):
        self.batch = batch
        self.fetched: list[tuple] = []

    def fetch(self, since, limit):
        self.fetched.append((since, limit))
        return self.batch

    def score_scale(self, name, *, ordinal=False):
        return None

    def fetch_labels(self, name, since, have=()):
        return TraceBatch(self.batch.traces, self.batch.annotations)

    def heldout_file(self):
        return None  # production traces: no true labels

    def dataset_examples(self, name):
        return [Example(f"{name}-1", {"request": "play jazz"}, "PlayMusic")]


def night(n: int) -> TraceBatch:
    traces = [
        TraceRecord(f"o{i}", f"t{i}", NOW, input=f"play song {i}", output="PlayMusic")
        for i in range(n)
    ]
    labels = [
        Annotation(f"s{i}", f"t{i}", "correct", float(i % 2), "BOOLEAN", "ANNOTATION", NOW)
        for i in range(0, n, 2)
    ]
    return TraceBatch(traces=traces, annotations=labels)


@pytest.fixture
def rt(tmp_path) -> Runtime:
    source = MemorySource(night(20))
    return Runtime(Settings(state_dir=tmp_path), lm=ScriptedLM(), traces=source)


async def test_a_runtime_built_with_fakes_runs_the_first_stages(rt):
    collected = await collect_traces.fn(rt, "n1")
    assert rt.traces.fetched == [(None, 1000)]  # no lookback: everything the source has
    assert len(collected.examples) == 20 and len(collected.items) == 10
    assert collected.scale == ScoreScale("boolean", name="correct")
    rt.settings.judge.max_metric_calls = 12
    alignment = await stages.align_judge_stage(rt, collected.items, collected.scale)
    assert alignment.sizes == {"train": 4, "val": 2, "heldout": 4}
    assert alignment.metric_calls <= 12 and alignment.primary == "kappa"
    assert alignment.judge.heldout["n"] == 4.0  # measured on the held-out labels


def test_knobs_replace_what_a_night_does_and_keep_what_it_runs_on(rt):
    knobs = rt.settings.knobs()
    knobs.seed, knobs.judge.min_agreement = 7, 0.4
    other = rt.with_knobs(knobs)
    assert (other.settings.seed, other.settings.judge.min_agreement) == (7, 0.4)
    assert other.lm is rt.lm and other.traces is rt.traces
    assert rt.settings.seed == 0  # the original runtime is unchanged


def test_each_scale_gets_its_fit():
    assert isinstance(fit_for(ScoreScale("boolean")), PassFailFit)
    fit = fit_for(STARS)
    assert isinstance(fit, ScaledFit) and fit.primary == "weighted_kappa"


def test_a_judge_becomes_the_metric_its_scale_needs():
    lm = ScriptedLM()
    assert isinstance(Judge({"rubric": "r"}, threshold=0.4).metric(lm), PointwiseJudge)
    assert isinstance(Judge({"rubric": "r"}, STARS).metric(lm), ScaledMetric)
    colours = ScoreScale("categorical", ("red", "blue"), name="colour")
    with pytest.raises(UnrankedScale, match="'colour'"):
        Judge({"rubric": "r"}, colours).metric(lm)


async def test_the_prompt_stage_counts_the_judge_verdicts_it_could_not_read(rt):
    """A continuous scale is read from the judge's text: "no idea" scores 0, and is counted."""
    rt.settings.agent_opt.max_metric_calls = 30
    rt.settings.agent_opt.pareto_size = 4
    rt.lm.reply = lambda messages: "no idea"
    percent = ScoreScale("numeric", minimum=0, maximum=100, name="percent")
    judge = Judge({"rubric": "r"}, percent)
    examples = [Example(id=f"e{i}", inputs={"request": f"play song {i}"}) for i in range(8)]
    stage = await stages.optimize_prompts_stage(rt, examples, rt.agent.seed_prompts(), judge)
    assert stage.metric_calls > 0
    assert stage.judge_unparseable == stage.metric_calls  # every verdict was unreadable


async def test_a_judge_model_of_its_own_judges_while_the_agent_runs_on_lm(tmp_path):
    agent_lm, judge_lm = ScriptedLM(reply=lambda m: "PlayMusic"), ScriptedLM()
    source = MemorySource(night(20))
    rt = Runtime(Settings(state_dir=tmp_path), lm=agent_lm, judge_lm=judge_lm, traces=source)
    collected = await collect_traces.fn(rt, "n1")
    rt.settings.judge.max_metric_calls = 12
    await stages.align_judge_stage(rt, collected.items, collected.scale)
    aligned = len(judge_lm.choice_calls)
    assert aligned > 0 and agent_lm.choice_calls == []  # alignment judged on the judge's
    rt.settings.agent_opt.max_metric_calls = 30
    rt.settings.agent_opt.pareto_size = 4
    examples = [Example(id=f"e{i}", inputs={"request": f"play song {i}"}) for i in range(8)]
    judge = Judge({"rubric": "r"}, collected.scale)
    await stages.optimize_prompts_stage(rt, examples, rt.agent.seed_prompts(), judge)
    assert len(judge_lm.choice_calls) > aligned  # the agent's metric, on the judge's model
    assert agent_lm.calls and agent_lm.choice_calls == []  # replies, never a verdict
    asked = agent_lm.calls + judge_lm.calls + judge_lm.choice_calls
    assert all((DATA_NOTE in str(m)) == (m not in agent_lm.calls) for m in asked)


def test_the_judge_model_is_lm_unless_set(tmp_path):
    fake = ScriptedLM()
    assert Runtime(Settings(state_dir=tmp_path), lm=fake).judge_lm is fake
    own = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "big-judge"}
    rt = Runtime(Settings(state_dir=tmp_path, judge_lm=own), lm=fake)
    assert rt.judge_lm is not fake and rt.judge_lm.model == "big-judge"
    assert rt.judge_lm is rt.judge_lm  # built once


class ProductionWithAdapter:
    """A registry whose production v3 has prompts and an adapter trained on `base`."""

    def __init__(self, folder, base: str):
        folder.mkdir()
        config = {"base_model_name_or_path": base}
        (folder / "adapter_config.json").write_text(json.dumps(config))
        self.folder = folder

    def prompt_name(self, component):
        return f"agent-{component}"

    def prompt_at_alias(self, name, alias):
        return f"{name} in production"

    def get_alias(self, name, alias):
        return 3

    def download_adapter(self, name, version, dst):
        return self.folder


class ServingLM(ScriptedLM):
    base_model_path = "/models/new"

    async def load_adapter(self, name, path):
        raise AssertionError("not loaded here")


async def test_production_s_adapter_is_left_out_when_tonight_s_model_cannot_serve_it(tmp_path):
    settings = Settings(state_dir=tmp_path / "state")
    registry = ProductionWithAdapter(tmp_path / "old", base="/models/old")
    rt = Runtime(settings, lm=ServingLM(), registry=registry, traces=MemorySource(night(2)))
    production = await read_production.fn(rt, "n1")
    assert production.version == 3 and production.adapter is None
    assert production.prompts["instructions"] == "agent-instructions in production"
    assert production.note.startswith("Production v3's adapter was trained on /models/old")
    registry.folder = ProductionWithAdapter(tmp_path / "same", base="/models/new").folder
    production = await read_production.fn(rt, "n2")
    assert production.adapter.path == str(tmp_path / "same") and production.note == ""


def test_held_out_examples_come_from_settings_a_dataset_or_with_the_traces(rt, tmp_path):
    assert rt.heldout_examples() == []  # a production source brings none
    rt.settings.eval.dataset = "golden"
    assert [e.id for e in rt.heldout_examples()] == ["golden-1"]
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"id": "m1", "inputs": {"request": "rain?"}, "reference": "GetWeather"}\n')
    rt.settings.eval.heldout_path = str(mine)  # a file wins over the dataset
    assert [(e.id, e.reference) for e in rt.heldout_examples()] == [("m1", "GetWeather")]
    demo = Runtime(Settings(state_dir=tmp_path))  # the bundled export brings its own
    assert len(demo.heldout_examples()) == 140


async def test_a_fixed_slice_of_traces_is_held_out_of_everything_else(rt):
    rt.settings.eval.heldout_trace_share = 0.3
    collected = await collect_traces.fn(rt, "n1")
    held = {e.id for e in collected.heldout}
    assert held == {f"t{i}" for i in range(20) if in_heldout_slice(f"t{i}", 0.3)}
    assert 0 < len(held) < 20
    assert not held & {e.id for e in collected.examples}  # not in GEPA's traffic
    assert not held & {i.id for i in collected.items}  # nor in the judge's labels
    assert rt.heldout_examples(collected.heldout) == collected.heldout
    again = await collect_traces.fn(rt, "n2")  # the same traces every night
    assert {e.id for e in again.heldout} == held


def test_gepa_knobs_of_the_night_reach_the_optimizer():
    settings = Settings.model_validate(
        {"agent_opt": {"use_merge": True, "max_merge_invocations": 2, "proposal_shape": "1x3"}}
    )
    config = stages.gepa_config(settings.agent_opt, seed=7)
    assert (config.use_merge, config.max_merge_invocations) == (True, 2)
    assert (config.proposal_shape, config.seed) == ("1x3", 7)
    judge_knobs = Settings().judge.model_copy(update={"max_metric_calls": 100})
    assert stages.gepa_config(judge_knobs, seed=0).proposal_shape == "auto"
    assert stages.gepa_config(judge_knobs, seed=0).max_reflection_calls == 100
    unbounded = Settings.model_validate(
        {"judge": {"max_reflection_calls": None, "max_metric_calls": 100}}
    )
    assert stages.gepa_config(unbounded.judge, seed=0).max_reflection_calls is None
    with pytest.raises(ValueError, match="use_merg"):
        Settings.model_validate({"agent_opt": {"use_merg": True}})  # misspelt: not ignored


class Interrupted(Exception):
    pass


async def test_a_prompt_stage_killed_midway_resumes_from_its_gepa_state(rt, tmp_path):
    """The night passes each GEPA stage a run folder: run again after a failure, the stage
    goes on from what it saved instead of paying again from zero."""
    cfg = rt.settings.agent_opt
    cfg.max_metric_calls, cfg.pareto_size, cfg.max_concurrency = 40, 4, 1
    cfg.proposal_shape, cfg.reflection_minibatch_size = "1x1", 2

    def reply(messages) -> str:
        text = messages[-1]["content"]
        if text.startswith("Rewrite this instruction"):  # a reflection: one more rule
            return f"```\nRoute it. {'Rule. ' * (text.count('Rule') + 1)}\n```"
        return "PlayMusic" + "!" * messages[0]["content"].count("Rule")

    rt.lm.reply = reply  # the judge likes each rule a little more
    rt.lm.p_first = lambda m: min(0.3 + 0.1 * m[-1]["content"].count("!"), 0.9)
    judge = Judge({"rubric": "r"}, threshold=0.5)
    examples = [Example(id=f"e{i}", inputs={"request": f"play song {i}"}) for i in range(10)]
    seed = rt.agent.seed_prompts()

    def agent_calls() -> int:
        return sum(
            m[0]["role"] == "system" and DATA_NOTE not in m[0]["content"] for m in rt.lm.calls
        )

    def stop_midway(event) -> None:  # counted at the model, as the budget counts a call:
        if agent_calls() >= 20:  # when it is sent
            raise Interrupted

    folder = tmp_path / "gepa-prompts"
    interrupted = False
    try:
        await stages.optimize_prompts_stage(rt, examples, seed, judge, stop_midway, None, folder)
    except* Interrupted:
        interrupted = True
    assert interrupted and (folder / "state.json").exists()
    paid_before = agent_calls()
    resumed = await stages.optimize_prompts_stage(rt, examples, seed, judge, None, None, folder)

    # it went on from what it had saved, and the two runs together kept to one budget
    assert resumed.best_val > resumed.seed_val and resumed.metric_calls <= cfg.max_metric_calls
    assert paid_before >= 20 and agent_calls() <= cfg.max_metric_calls


async def test_the_head_stage_must_beat_the_judge_the_lora_step_left(tmp_path):
    """The reward-head step reads the night's split and settings, and the judge it must
    beat on validation labels is the LoRA step's kept adapter when there is one."""
    from judges.align import Alignment
    from judges.judge_lora import JudgeLora
    from judges.types import JudgedItem

    def separating(messages) -> list[float]:
        return [1.0 if "[good]" in messages[1]["content"] else -1.0, len(messages[1]["content"])]

    lm = ScriptedLM(feature=separating)
    lm.base_model_path = "/models/judge"
    rt = Runtime(Settings(state_dir=tmp_path), lm=lm, judge_lm=lm)
    items = [
        JudgedItem(f"t{i}", f"request {i}", f"reply {i} [{'good' if i % 3 else 'bad'}]", i % 3 > 0)
        for i in range(40)
    ]
    rubric = Judge({"rubric": "r"}, threshold=0.5, heldout={"kappa": 0.1})
    alignment = Alignment(rubric, rubric, 0.2, 0.2, False, rubric.prompts, 10, {})
    lora = JudgeLora(20, 0.2, {"checkpoint-2": 0.4, "checkpoint-4": 1.0}, "/a/checkpoint-4")
    same, step = await stages.judge_head_stage(rt, alignment, lora, items, tmp_path / "head")
    assert step.so_far == "rubric plus LoRA adapter" and step.so_far_val == 1.0
    assert step.val == 1.0 and step.kept is None and same is alignment  # a tie is no gain

    lora = JudgeLora(20, 0.2, {"checkpoint-4": 0.1})  # no checkpoint kept: the rubric's 0.2
    headed, step = await stages.judge_head_stage(rt, alignment, lora, items, tmp_path / "head")
    assert step.so_far == "the rubric" and step.so_far_val == 0.2 and step.kept
    assert headed.judge.head == str(tmp_path / "head") and headed.judge.prompts == {"rubric": "r"}

    rt.settings.judge.head.enabled = False
    same, step = await stages.judge_head_stage(rt, alignment, lora, items, tmp_path / "off")
    assert same is alignment and step.note == "judge.head.enabled is off"


async def test_a_held_out_evaluation_counts_its_rollouts_then_the_replies_it_judges(rt):
    """Unlabelled examples: the bar counts the agent's rollouts, then the judge's reading."""
    examples = [Example(f"e{i}", {"request": f"play song {i}"}) for i in range(6)]
    judge = Judge({"rubric": "r"}, threshold=0.5)
    seen = []
    with StageProgress("held-out evaluation: seed", len(examples), "rollouts") as progress:
        advance = progress.advance
        progress.advance = lambda n=1: seen.append((progress.unit, n)) or advance(n)
        evaluation = await stages.evaluate_agent(
            rt, rt.agent.seed_prompts(), examples, judge, progress=progress
        )
    assert evaluation.n == 6 and evaluation.judge_pass_rate is not None
    assert seen == [("rollouts", 1)] * 6 + [("replies judged", 1)] * 6
    task = progress.task
    assert (task.fields["unit"], task.total, task.completed) == ("replies judged", 6, 6)


async def test_a_night_with_no_labelled_trace_aligns_nothing_and_says_so(tmp_path):
    """Traces and no labels (a new project): the seed rubric's fit raised 'no labels to
    compare against' in align-judge, and the night ended there."""
    unlabelled = TraceBatch(night(20).traces, [])
    rt = Runtime(Settings(state_dir=tmp_path), lm=ScriptedLM(), traces=MemorySource(unlabelled))
    collected = await collect_traces.fn(rt, "quiet")
    assert len(collected.examples) == 20 and collected.items == []
    alignment = await stages.align_judge_stage(rt, collected.items, collected.scale)
    assert alignment.skipped.startswith("Judge alignment skipped: 0 labels")
    assert alignment.judge.prompts == stages.judge_seed(rt) and alignment.metric_calls == 0


async def test_a_store_of_labels_older_than_the_window_reads_as_that_and_aligns_nothing(rt):
    """judge.label_window_days shorter than the labels' age: the store holds labels, none
    inside the window; the night says so instead of raising in align-judge."""
    rt.settings.judge.label_window_days = (datetime.now(UTC) - NOW).days  # NOW is older
    collected = await collect_traces.fn(rt, "old-labels")
    assert collected.items == [] and collected.labels_outside_window == 10
    assert summarize(collected)["annotations_outside_window"] == 10
    alignment = await stages.align_judge_stage(rt, collected.items, collected.scale)
    assert alignment.skipped.startswith("Judge alignment skipped: 0 labels")


async def test_the_head_stage_with_no_labels_fits_nothing_and_says_so(tmp_path):
    """A night with no labels reaches the reward-head step with none: a note, no head."""
    from judges.align import Alignment
    from judges.judge_lora import JudgeLora

    lm = ScriptedLM()
    lm.base_model_path = "/models/judge"
    rt = Runtime(Settings(state_dir=tmp_path), lm=lm, judge_lm=lm)
    rubric = Judge({"rubric": "r"}, threshold=0.5)
    alignment = Alignment(rubric, rubric, math.nan, math.nan, False, rubric.prompts, 0, {})
    lora = JudgeLora(0, math.nan, note="0 training and 0 validation labels: too few to train on")
    same, step = await stages.judge_head_stage(rt, alignment, lora, [], tmp_path / "head")
    assert same is alignment and step.kept is None and step.val is None
    assert step.note.startswith("too few labels to fit and validate a head (0 passing")
    assert lm.feature_calls == []
