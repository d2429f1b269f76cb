"""The gepa_vs_upstream harness: what both libraries reflect on, and how time to quality is read."""

import json
from dataclasses import asdict

import pytest

from benchmarks.gepa_vs_upstream import parse_variant, upstream_templates
from benchmarks.intent_task import COMPONENT_TEMPLATES, IntentTask, Scored, reflective_dataset
from benchmarks.time_to_quality import (
    Run,
    admitted_line,
    floor_line,
    floor_s,
    lineage_depth,
    mean_curve,
    quality_bar,
    report_saved,
    time_to_quality,
)
from gepa_opt.meta_prompt import build_reflection_prompt, check_template, render_records
from infra.agents.intent_router import example_messages
from infra.types import Example
from tests.fakes import ScriptedLM


def scored(request: str, intent: str) -> Scored:
    example = Example(id=request, inputs={"request": request}, reference=intent)
    return Scored(example, "no idea", 0.0, f"Wrong: the right label is '{intent}'.")


def test_example_turns_are_reflected_on_in_their_own_format():
    rollouts = [scored("will it rain in Oslo", "GetWeather"), scored("play jazz", "PlayMusic")]
    dataset = reflective_dataset(rollouts, ["instructions", "examples"])
    assert dataset["instructions"][0] == {
        "Inputs": "will it rain in Oslo",
        "Generated Outputs": "no idea",
        "Feedback": "Wrong: the right label is 'GetWeather'.",
    }
    assert [r["Right example turn"] for r in dataset["examples"]] == [
        "will it rain in Oslo => weather",
        "play jazz => music",
    ]
    # An LM that only echoes the rendered records still yields turns the agent reads.
    assert example_messages(render_records(dataset["examples"]))[:4] == [
        {"role": "user", "content": "will it rain in Oslo"},
        {"role": "assistant", "content": "weather"},
        {"role": "user", "content": "play jazz"},
        {"role": "assistant", "content": "music"},
    ]


def test_both_libraries_get_the_same_template_in_their_own_placeholders():
    for component, template in COMPONENT_TEMPLATES.items():
        check_template(template, component)
        theirs = upstream_templates(COMPONENT_TEMPLATES)[component]
        assert "<curr_param>" in theirs and "<side_info>" in theirs
        ours_rendered = build_reflection_prompt(template, "X", [{"a": "1"}])
        theirs_rendered = theirs.replace("<curr_param>", "X").replace(
            "<side_info>", "# Example 1\n## a\n1\n\n"
        )
        assert ours_rendered == theirs_rendered


def run(engine: str, ref_val: float, referee: list[tuple[float, float]]) -> Run:
    return Run(
        engine=engine, label=engine, setting="local", seed=0, wall_s=1.0, metric_calls=1,
        budget=1, reflection_calls=0, utilization=1.0, best_val=ref_val, best_candidate={},
        timeline=[], seed_val=referee[0][1], referee=referee, ref_val=ref_val,
    )  # fmt: skip


def test_the_bar_is_a_s_final_score_unless_a_never_beat_the_seed():
    a = run("A", 0.3, [(0.0, 0.1), (5.0, 0.3)])
    c = run("C", 0.4, [(0.0, 0.1), (2.0, 0.3), (4.0, 0.4)])
    assert quality_bar({"A": a, "C": c})[0] == 0.3
    assert time_to_quality(c.referee, 0.3) == 2.0
    stuck = run("A", 0.1, [(0.0, 0.1), (5.0, 0.1)])
    bar, note = quality_bar({"A": stuck, "C": c})
    assert bar == 0.4 and "not above the seed" in note
    assert time_to_quality(stuck.referee, bar) is None


def test_the_seed_averaged_curve_holds_each_run_s_last_point():
    early = run("C", 0.4, [(0.0, 0.1), (2.0, 0.4)])
    late = run("C", 0.2, [(1.0, 0.1), (6.0, 0.2)])
    curve = mean_curve([early, late])
    assert [t for t, _ in curve] == [0.0, 1.0, 2.0, 6.0]
    assert [round(v, 3) for _, v in curve] == [0.1, 0.1, 0.25, 0.3]
    assert time_to_quality(curve, 0.3) == 6.0


def test_a_saved_run_reports_again_without_running(tmp_path, capsys):
    runs = [
        run("A", 0.3, [(0.0, 0.1), (5.0, 0.3)]),
        run("C", 0.3, [(0.0, 0.1), (2.0, 0.3)]),
    ]
    saved = tmp_path / "runs.json"
    saved.write_text(json.dumps([asdict(r) for r in runs]))
    report_saved(saved)
    out = capsys.readouterr().out
    assert "quality bar 0.300 (bar = ref_val of A's final candidate)" in out
    assert "C/A time to quality: 0.40" in out  # per seed, and on the seed-averaged curve
    assert out.count("C/A time to quality: 0.40") == 2


async def test_a_reflection_model_of_its_own_writes_the_demo_s_proposals():
    agent, writer = ScriptedLM(lambda m: "weather"), ScriptedLM(lambda m: "```new turns```")
    reflect = IntentTask(agent, writer).reflector(seed=3)
    assert await reflect("the meta-prompt") == "```new turns```"
    assert writer.calls == [[{"role": "user", "content": "the meta-prompt"}]] and not agent.calls
    alone = ScriptedLM(lambda m: "mine")  # without one, the agent's model writes them
    assert await IntentTask(alone).reflector(seed=3)("the meta-prompt") == "mine"


def test_admitted_candidates_are_counted_against_their_own_seed_s_val():
    # two engines can end on the same best score while one's other passes fell below it
    first, second = run("D", 0.5, [(0.0, 0.2), (3.0, 0.5)]), run("D", 0.4, [(0.0, 0.4)])
    first.admitted, second.admitted = [0.2, 0.1, 0.5], [0.4, 0.45]
    line = admitted_line("D", [first, second])
    assert "5 admitted after the seed (2.5 per seed), 2 above the seed's val (0.40)" in line
    nothing = admitted_line("A", [run("A", 0.1, [(0.0, 0.1)])])
    assert "0 admitted after the seed (0.0 per seed), 0 above the seed's val (n/a)" in nothing


def test_the_floor_is_the_first_candidate_any_engine_held_and_bounds_every_ratio():
    def seed_of(a_first: float, c_first: float, a_at_bar: float) -> dict[str, Run]:
        a = run("A", 0.3, [(1.0, 0.1), (a_first, 0.2), (a_at_bar, 0.3)])
        c = run("C", 0.3, [(1.0, 0.1), (c_first, 0.3)])
        for r, first in ((a, a_first), (c, c_first)):
            r.timeline = [(1.0, {}), (first, {})]
        a.ttq_s = a_at_bar
        return {"A": a, "C": c}

    lucky = seed_of(a_first=10.0, c_first=6.0, a_at_bar=10.0)  # A's first proposal won
    slow = seed_of(a_first=12.0, c_first=8.0, a_at_bar=40.0)
    assert floor_s(lucky) == 6.0 and floor_s(slow) == 8.0
    # (6 + 8) / (10 + 40); half of A's 10 s is below the floor of 6 s, half of 40 s is not
    line = floor_line([lucky, slow], "A")
    assert "floor/A: 0.28" in line and "out of reach for every engine in 1 of them" in line
    assert floor_s({"A": run("A", 0.1, [(1.0, 0.1)])}) is None  # nothing beyond the seed


def test_variants_name_gepa_config_fields_and_depth_follows_the_longest_lineage():
    assert parse_variant("E=proposal_shape:1x2,use_merge:true") == (
        "E",
        {"proposal_shape": "1x2", "use_merge": True},
    )
    with pytest.raises(SystemExit, match="not a GEPAConfig field"):
        parse_variant("E=shape:1x2")
    with pytest.raises(SystemExit, match="other than A-D"):
        parse_variant("C=use_merge:true")
    # 0 seed; 1, 2 a chain; 3 a merge of 2 and 1; upstream writes [None] for the seed
    assert lineage_depth([[None], [0], [1], [2, 1]], 3) == 3
    assert lineage_depth([(), (0,), (0,)], 2) == 1


def test_the_depth_task_climbs_one_rung_per_right_reflection():
    import asyncio

    from benchmarks.depth_task import DepthTask, ScriptedReflection, answer, prefix, secret
    from gepa_opt.meta_prompt import build_reflection_prompt

    task = DepthTask()
    seed = task.seed_prompts["instructions"]
    question = next(q for q in task.val if q.level >= 2)
    assert answer(question, seed)[1] == 0.0
    rung = f"{seed}\n{question.topic}-1: {secret(question.topic, 1)}"
    assert answer(question, rung)[1] == 1 / question.level
    wrong = f"{rung}\n{question.topic}-1: nothing"
    assert prefix(wrong, question.topic) == 0  # two secrets for one rung: neither counts
    # the scripted reflection reads the feedback and writes the rung it names (or a wrong
    # secret), the same way for the same prompt and seed, differently for a sibling
    trajectories = [asyncio.run(task.rollout(question, {"instructions": seed}))]
    records = task.reflective_dataset(trajectories, ["instructions"])["instructions"]
    prompt = build_reflection_prompt(task.templates["instructions"], seed, records)
    replies = [ScriptedReflection(0)(prompt) for _ in range(2)]
    assert replies[0] == replies[1]
    reflect = ScriptedReflection(0)
    siblings = {reflect(prompt) for _ in range(8)}
    assert len(siblings) > 1
    assert any(prefix(reply, question.topic) == 1 for reply in siblings)
