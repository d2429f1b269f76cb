"""A second annotation name through the night's stages, on fakes: its labels read, its
own judge fitted, gated and registered under its own names, its weight in the agent's
objective, and its judge's scores of both versions' held-out replies."""

from datetime import UTC, datetime

import pytest

from flows.night import stages
from flows.night.criteria import weighted
from flows.night.runtime import Runtime
from flows.nightly import align_criteria, collect_traces, criteria_heldout
from infra.settings import Settings
from infra.traces import Annotation, TraceBatch, TraceRecord
from judges.judge import Judge
from judges.versions import JUDGE_PRODUCTION, judge_prompt_name
from judges.weighted_metric import WeightedMetric
from tests.fakes import ScriptedLM
from tests.flows.night.test_stages import MemorySource

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def politeness(messages) -> float:
    """The polite criterion's rubric reads "please" as polite; any other rubric is a coin."""
    rubric, exchange = messages[0]["content"], messages[1]["content"]
    if "'polite'" not in rubric:
        return 0.5
    return 0.9 if "please" in exchange.split("<reply>")[-1] else 0.1


def night(n: int = 60) -> TraceBatch:
    """Every other reply says please; people labelled all of them polite or not, and half
    of them correct."""
    traces = [
        TraceRecord(
            f"o{i}", f"t{i}", NOW, input=f"play song {i}", output="PlayMusic" + " please" * (i % 2)
        )
        for i in range(n)
    ]
    correct = [
        Annotation(f"c{i}", f"t{i}", "correct", 1.0, "BOOLEAN", "ANNOTATION", NOW)
        for i in range(0, n, 2)
    ]
    polite = [
        Annotation(f"p{i}", f"t{i}", "polite", float(i % 2), "BOOLEAN", "ANNOTATION", NOW)
        for i in range(n)
    ]
    return TraceBatch(traces=traces, annotations=correct + polite)


@pytest.fixture
def rt(tmp_path) -> Runtime:
    settings = Settings(
        state_dir=tmp_path, traces={"criteria": {"polite": {"weight": 0.5, "max_drop": 0.1}}}
    )
    return Runtime(settings, lm=ScriptedLM(p_first=politeness), traces=MemorySource(night()))


async def test_a_second_annotation_name_gets_its_own_judge_registered_and_gated(rt):
    collected = await collect_traces.fn(rt, "n1")
    assert len(collected.items) == 30  # the primary's labels: unchanged
    (polite,) = collected.criteria
    assert polite.name == "polite" and len(polite.items) == 60
    assert polite.scale.name == "polite" and polite.read_to == NOW

    (criterion,) = await align_criteria.fn(rt, "n1", collected)
    assert criterion.alignment.metric_calls == 0  # fitted, not searched
    assert "'polite'" in criterion.judge.prompts["rubric"]
    assert criterion.judge.heldout_score == pytest.approx(1.0) and criterion.trusted
    name = judge_prompt_name(rt.registry, "rubric", "polite")
    assert name.endswith("judge-polite-rubric") and criterion.gate.registered == {name: 1}
    at_alias = rt.registry.prompt_version_at_alias(name, JUDGE_PRODUCTION)
    assert at_alias is not None and at_alias.version == 1
    # the primary's judge names are left alone
    primary = judge_prompt_name(rt.registry, "rubric")
    assert rt.registry.prompt_version_at_alias(primary, JUDGE_PRODUCTION) is None

    assert weighted((criterion,)) == ((criterion.judge, 0.5),)
    metric = stages.objective_metric(rt, Judge({"rubric": "right intent"}), weighted((criterion,)))
    assert isinstance(metric, WeightedMetric) and metric.total == 1.5

    # both versions' held-out replies, judged by the criterion's judge: the candidate
    # dropped its please, and the gate's evidence shows it
    production = stages.Evaluation(2, None, None, outputs={"h1": "PlayMusic please"})
    production.requests = {"h1": "play jazz"}
    candidate = stages.Evaluation(2, None, None, outputs={"h1": "PlayMusic"})
    candidate.requests = {"h1": "play jazz"}
    (evidence,) = await criteria_heldout.fn(rt, "n1", (criterion,), candidate, production)
    assert evidence.name == "polite" and evidence.trusted and evidence.max_drop == 0.1
    assert evidence.production["h1"] > 0.8 > 0.2 > evidence.candidate["h1"]


async def test_an_untrusted_criterion_judge_is_left_out_of_the_objective(rt):
    rt.settings.judge.min_heldout_labels = 1000  # too few labels: nothing is trusted
    collected = await collect_traces.fn(rt, "n1")
    (criterion,) = await align_criteria.fn(rt, "n1", collected)
    assert not criterion.trusted and weighted((criterion,)) == ()
    assert not isinstance(stages.objective_metric(rt, criterion.judge), WeightedMetric)


async def test_with_no_criteria_the_night_collects_none(tmp_path):
    rt = Runtime(Settings(state_dir=tmp_path), lm=ScriptedLM(), traces=MemorySource(night()))
    collected = await collect_traces.fn(rt, "n1")
    assert collected.criteria == () and len(collected.items) == 30
    assert rt.labels.labels("polite") == []  # another name's labels are not read


def test_a_criterion_s_judge_names_hold_only_what_mlflow_takes(rt):
    name = judge_prompt_name(rt.registry, "rubric", "tone / politeness")
    assert name.endswith("-judge-tone-politeness-rubric")


async def test_a_criterion_s_judge_in_use_is_watched_and_untrusted_once_it_drifts(rt):
    """Each annotation name's judge is watched as the primary's: labels made after the
    newest its judge in use learned from that say the opposite of it mark it drifted, and
    a drifted criterion judge kept in use neither steers the agent nor blocks the gate."""
    first = await align_criteria.fn(rt, "n1", await collect_traces.fn(rt, "n1"))
    assert first[0].gate.watch is None  # no judge in use yet
    # a day later, on the next day's replies, people say the opposite: please is rude now
    later = datetime(2026, 12, 1, tzinfo=UTC)
    day2 = night(120).traces[60:]
    flipped = [
        Annotation(f"q{i}", t.trace_id, "polite", float(1 - i % 2), "BOOLEAN", "ANNOTATION", later)
        for i, t in enumerate(day2)
    ]
    rt.traces.batch = TraceBatch(traces=day2, annotations=flipped)
    rt.settings.judge.min_watch_labels = 10
    collected = await collect_traces.fn(rt, "n2")
    (criterion,) = await align_criteria.fn(rt, "n2", collected)
    watch = criterion.gate.watch
    assert watch is not None and watch.labels >= 10 and watch.dropped, watch
    assert criterion.gate.kept_previous and not criterion.trusted
    assert weighted((criterion,)) == ()
