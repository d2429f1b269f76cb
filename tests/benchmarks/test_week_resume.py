"""A week of nights stopped midway goes on where it stopped (`benchmarks.week`): the
default-budget week takes longer than one sitting, so its state is saved after each step."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks.week import Week, run_week
from benchmarks.week_stream import WeekStream


class Stopped(Exception):
    """The week's machine went away."""


class ScriptedWeek(Week):
    """A week whose nights only leave their run folder: the scenario's bookkeeping, not
    the nights, is under test."""

    stop_in: int | None = None
    calls: list[str]

    def night(self, day: int) -> None:
        self.calls.append(f"night {day}")
        run_id = f"run-{day}"
        (self.state / "runs" / run_id).mkdir(parents=True)
        if day == self.stop_in:
            raise Stopped
        self.nights[day], self.seconds[day] = run_id, 1.0

    def killed_night(self, day: int, after_s: float) -> None:
        self.night(day)

    def flywheel(self, day: int, *args: str, timeout: float = 0) -> subprocess.CompletedProcess:
        self.calls.append(" ".join(args))
        return subprocess.CompletedProcess(args, 0, "", "")

    def status(self, day: int) -> dict:
        return {"judge": {"judge-rubric": 1}}

    def outbox(self, name: str) -> list[dict]:
        return []


def test_a_week_stopped_inside_a_night_resumes_that_night_and_repeats_nothing(tmp_path):
    first = ScriptedWeek(tmp_path, {"FLYWHEEL_LORA__ENABLED": "false"})
    first.calls, first.stop_in = [], 3
    with pytest.raises(Stopped):
        run_week(first)
    assert first.calls == ["night 1", "night 2", "night 3"]

    again = ScriptedWeek.load(tmp_path, {"FLYWHEEL_LORA__ENABLED": "false"})
    again.calls = []
    run_week(again)
    # night 3 resumed, not begun again; the hand moves once, before night 5
    assert again.calls == [
        "run --resume run-3", "night 4", "promote --by week-bench", "rollback --by week-bench",
        "night 5", "night 6", "night 7",
    ]  # fmt: skip
    assert again.nights == {d: f"run-{d}" for d in range(1, 8)} and again.interrupted == [3]
    # Wednesday's traffic and its edited label written once: the stream went on too
    stream = again.stream
    assert len(stream.traces_of(3)) == 30 and len(stream.traces_of(1)) == 60
    assert stream.edited and len(stream.late) == 5


def test_a_week_goes_on_only_on_the_settings_it_began_with(tmp_path):
    week = Week(tmp_path, {"FLYWHEEL_LORA__ENABLED": "false"})
    week.save()
    with pytest.raises(SystemExit, match="other settings"):
        Week.load(tmp_path, {})


def test_the_stream_restored_writes_the_same_export(tmp_path):
    stream = WeekStream(tmp_path / "a")
    for day in (1, 2, 3):
        stream.add_day(day)
    stream.edit_a_label()
    saved = json.loads(json.dumps(stream.state()))  # as week.json holds it
    restored = WeekStream.restore(tmp_path / "b", saved)
    restored.add_day(4)
    stream.add_day(4)
    for name in ("observations.jsonl", "scores.jsonl", "heldout.jsonl"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
