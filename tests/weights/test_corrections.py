"""The teacher's corrections of commented failing replies, on a scripted teacher and judge."""

from infra.lm import ModelCallFailed
from tests.fakes import ScriptedLM
from weights.corrections import Commented, correction_prompt, write_corrections

CHAT = [
    {"role": "system", "content": "Say which kind of request: weather or music."},
    {"role": "user", "content": "rain tomorrow?"},
]


def commented(example_id: str, reply: str = "The Beatles", comment: str = "expected weather"):
    return Commented(example_id, CHAT, reply, comment)


def test_the_teacher_reads_the_chat_the_reply_and_the_comment():
    (system, user) = correction_prompt(commented("t1", comment="expected weather; said music"))
    assert "only that reply" in system["content"]
    text = user["content"]
    assert "[system] Say which kind of request" in text and "[user] rain tomorrow?" in text
    assert "<reply>\nThe Beatles\n</reply>" in text
    assert "The reviewer's comment: expected weather; said music" in text


async def test_a_correction_trains_only_where_the_judge_passes_it():
    replies = {"t1": "weather", "t2": "music", "t3": " The Beatles ", "t4": ""}
    teacher = ScriptedLM(reply=lambda m: next(r for k, r in replies.items() if k in str(m)))
    judged = []

    async def passes(example_id: str, reply: str) -> bool:
        judged.append((example_id, reply))
        return reply == "weather"

    items = [
        Commented(k, [*CHAT, {"role": "user", "content": f"id {k}"}], "The Beatles", "expected x")
        for k in replies
    ]
    done: list[int] = []
    out = await write_corrections(teacher, items, passes, done=done.append)
    assert out.kept == {"t1": "weather"}
    assert done == [1] * 4  # each reply counted as its correction ends, kept or not
    assert (out.asked, out.refused, out.empty, out.failed) == (4, 1, 2, 0)
    # the reply itself and an empty one correct nothing: the judge is not asked about them
    assert sorted(judged) == [("t1", "weather"), ("t2", "music")]
    assert all(len(call) == 2 for call in teacher.calls)  # system and user, nothing else


async def test_a_call_that_fails_for_good_is_counted_not_kept():
    class Down(ScriptedLM):
        async def complete(self, messages, **params):
            raise ModelCallFailed("timeout", "the teacher did not answer")

    async def judge_down(example_id: str, reply: str):
        return None

    gone = await write_corrections(Down(), [commented("t1")], judge_down)
    assert gone.kept == {} and gone.failed == 1
    unjudged = await write_corrections(
        ScriptedLM(lambda m: "weather"), [commented("t1")], judge_down
    )
    assert unjudged.kept == {} and unjudged.failed == 1


async def test_a_correction_written_in_the_prompt_s_reply_tags_is_the_text_inside():
    async def passes(example_id: str, reply: str) -> bool:
        return reply == "weather"

    for written in ("<reply>\nweather\n</reply>", "<reply>weather</reply> because it rains"):
        out = await write_corrections(ScriptedLM(lambda m, w=written: w), [commented("t1")], passes)
        assert out.kept == {"t1": "weather"}
