"""Label targets on a night of fakes: which failing replies the teacher corrects, and
that only the judge's passes train."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from flows.night.collect import collect, hold_out, in_heldout_slice
from flows.night.label_targets import commented, newest_labelled, teacher_corrections
from flows.night.runtime import Runtime
from flows.night.stages import demonstrations
from infra.agents.intent_router import IntentRouter
from infra.settings import Settings
from infra.traces import Annotation, TraceBatch, TraceRecord
from infra.traces.types import Correction
from judges.judge import Judge
from judges.pointwise import seed_judge_prompts
from tests.fakes import ScriptedLM

NOW = datetime(2026, 12, 6, tzinfo=UTC)
IDS = [f"trace-{i}" for i in range(12)]


def night() -> TraceBatch:
    traces = [
        TraceRecord(
            f"o-{t}",
            t,
            NOW,
            input=[
                {"role": "system", "content": "route"},
                {"role": "user", "content": f"rain {t}"},
            ],
            output=f"logged {t}",
        )
        for t in IDS
    ]
    labels = [
        Annotation(
            f"s-{t}", t, "correct", 0.0, "BOOLEAN", "ANNOTATION", NOW, comment="expected weather"
        )
        for t in IDS[:10]
    ] + [Annotation("s-quiet", IDS[10], "correct", 0.0, "BOOLEAN", "ANNOTATION", NOW)]  # no comment
    return TraceBatch(traces, labels, corrections=[Correction("c", IDS[0], "weather", NOW)])


def test_the_teacher_is_asked_about_commented_failures_nobody_corrected_outside_held_out():
    collected = hold_out(collect(night(), IntentRouter(), "correct"), 0.3)
    held = {t for t in IDS if in_heldout_slice(t, 0.3)}
    assert held and IDS[0] not in held  # this split holds some out, and not the corrected one
    asked = {c.example_id for c in commented(collected)}
    assert asked == set(IDS[1:10]) - held  # not corrected (0), commented (not 10), not held
    first = next(c for c in commented(collected))
    assert first.reply == f"logged {first.example_id}" and first.comment == "expected weather"
    assert first.chat[-1] == {"role": "user", "content": f"rain {first.example_id}"}


def test_a_night_asks_the_teacher_about_its_most_recently_labelled_comments_only():
    collected = collect(night(), IntentRouter(), "correct")
    asked = commented(collected)  # trace-1 ... trace-9
    labelled_at = {c.example_id: NOW - timedelta(hours=int(c.example_id[-1])) for c in asked}
    newest = newest_labelled(asked, labelled_at, 3)
    assert [c.example_id for c in newest] == ["trace-1", "trace-2", "trace-3"]
    labelled_at = {c.example_id: NOW + timedelta(hours=int(c.example_id[-1])) for c in asked}
    # in the order they were asked, whatever the order of their labels
    assert [c.example_id for c in newest_labelled(asked, labelled_at, 2)] == ["trace-8", "trace-9"]
    assert newest_labelled(asked, labelled_at, None) == asked == newest_labelled(asked, {}, 9)


async def test_only_corrections_the_judge_passes_are_kept():
    collected = collect(night(), IntentRouter(), "correct")
    # the teacher writes "weather" for even traces, "music" for odd ones; the judge passes
    # a reply when it says weather
    teacher = ScriptedLM(
        reply=lambda m: (
            "weather" if int(m[1]["content"].split("trace-")[1][0]) % 2 == 0 else "music"
        )
    )
    judge_lm = ScriptedLM(p_first=lambda m: 0.9 if "<reply>\nweather" in m[-1]["content"] else 0.1)
    rt = Runtime(Settings(), lm=ScriptedLM(), reflection_lm=teacher, judge_lm=judge_lm)
    judge = Judge(seed_judge_prompts("a reply names the kind"), threshold=0.5)
    written = await teacher_corrections(rt, collected, judge, max_tokens=8)
    assert written.asked == 9 and written.refused == 5  # trace-1, 3, 5, 7, 9
    assert written.kept == {t: "weather" for t in IDS[2:10:2]}
    replies = replace(collected, written=written.kept).human_replies()
    assert replies[IDS[2]] == [("weather", 1.0), (f"logged {IDS[2]}", 0.0)]
    assert replies[IDS[3]] == [(f"logged {IDS[3]}", 0.0)]  # refused: nothing to learn but that


def test_demonstrations_come_from_training_traces_right_replies_only():
    collected = collect(night(), IntentRouter(), "correct")
    collected = replace(collected, written={IDS[2]: "weather"})
    targets = collected.reply_targets()
    assert targets == {IDS[0]: "weather", IDS[2]: "weather"}  # a person's, the teacher's
    rt = Runtime(Settings(), lm=ScriptedLM(), judge_lm=ScriptedLM())
    metric = Judge(seed_judge_prompts()).metric(rt.judge_lm)
    trainset = [ex for ex in collected.examples if ex.id != IDS[2]]  # IDS[2]: Pareto set
    shown = demonstrations(rt, trainset, IntentRouter().seed_prompts(), targets, metric,
                           rt.settings.agent_opt)  # fmt: skip
    assert shown.component == "examples"
    assert [(d.request, d.text) for d in shown.pool] == [
        (f"rain {IDS[0]}", f"rain {IDS[0]} => weather")
    ]
    off = rt.settings.agent_opt.model_copy(update={"demonstrations": False})
    assert demonstrations(rt, trainset, IntentRouter().seed_prompts(), targets, metric, off) is None


async def test_the_nights_corrections_stage_asks_at_most_its_cap_and_says_how_many_it_left():
    from flows.nightly import write_corrections

    collected = collect(night(), IntentRouter(), "correct")
    teacher, judge_lm = ScriptedLM(reply=lambda m: "weather"), ScriptedLM(p_first=lambda m: 0.9)
    settings = Settings(corrections={"max_per_night": 4})
    rt = Runtime(settings, lm=ScriptedLM(), reflection_lm=teacher, judge_lm=judge_lm)
    judge = Judge(seed_judge_prompts("a reply names the kind"), threshold=0.5)
    written = await write_corrections.fn(rt, "night", collected, judge)
    assert (written.asked, written.left, len(written.kept)) == (4, 5, 4)
    assert len(teacher.calls) == 4
