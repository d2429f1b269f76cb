"""The run's call journal: every metric call logged as it is sent, every result as it
lands, every reflection's text, so a run killed at any moment resumes within its budget.

`run_dir/calls.jsonl` is append-only, one JSON object per line:
  {"paid": key}                       the pair's call is sent (its worker slot granted) and
                                      charged; a pair is charged once, not per try
  {"done": key, "entry": {...}}       its result (score; output and trajectory if JSON)
  {"failed": key}                     every try failed (`CallFailed`): its charge comes back
  {"reflected": [iteration, component], "text": "..."}
  {"demonstrated": [iteration, component], "text": "..."}   drawn from the pool, no LM call
A line reaches the operating system when written, so a SIGKILL loses none of it (only a
power cut could, which `RunStore`'s fsynced snapshots cover up to the last save). The
snapshot records the journal's length when it was taken; a resumed run counts the calls
paid after it and takes back the results and reflections logged after it, so it pays for
nothing twice and never more than the budget in all.

A call in flight at the kill was sent: it counts (it was made). Its answer is lost, not
its charge: the resumed run asks that pair again under the charge already counted
(`Replayed.unanswered`), so a budget that fit the killed run fits its resume. The system
under optimization may see such a pair twice, at most `max_concurrency` per kill.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gepa_opt.cache import CachedEvaluation, CacheKey
from gepa_opt.snapshot_json import decode_entry, decode_key, encode_entry, encode_key


@dataclass
class Replayed:
    """What the journal holds past a snapshot."""

    paid: int = 0
    results: dict[CacheKey, CachedEvaluation] = field(default_factory=dict)
    reflections: dict[tuple[int, str], str] = field(default_factory=dict)
    demonstrations: dict[tuple[int, str], str] = field(default_factory=dict)
    """Texts of demonstrations components (`gepa_opt.demonstrations`): proposed like a
    reflection's, but no reflection call was made for them."""
    unanswered: set[CacheKey] = field(default_factory=set)
    """Pairs charged, in the whole journal, whose answer never came (in flight at a kill):
    paid for already, so asking them again costs nothing more."""


class CallJournal:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    @property
    def offset(self) -> int:
        """Bytes written so far: where a snapshot taken now leaves off."""
        return self._file.tell()

    def paid(self, keys: list[CacheKey]) -> None:
        self._write([{"paid": encode_key(key)} for key in keys])

    def done(self, key: CacheKey, evaluation: CachedEvaluation) -> None:
        self._write([{"done": encode_key(key), "entry": encode_entry(evaluation)}])

    def failed(self, key: CacheKey) -> None:
        self._write([{"failed": encode_key(key)}])

    def reflected(self, iteration: int, component: str, text: str) -> None:
        self._write([{"reflected": [iteration, component], "text": text}])

    def demonstrated(self, iteration: int, component: str, text: str) -> None:
        self._write([{"demonstrated": [iteration, component], "text": text}])

    def _write(self, lines: list[dict[str, Any]]) -> None:
        self._file.write("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
        self._file.flush()  # to the OS: survives the process being killed

    def replay(self, since: int) -> Replayed:
        """Everything logged from byte `since` on (a line cut short by a kill is skipped),
        and the pairs left unanswered by every line, those before `since` too: a pair
        sent before a save may have been lost at a later kill."""
        replayed = Replayed()
        start = 0  # of the line read
        with self.path.open("rb") as file:
            for number, raw in enumerate(file, start=1):
                try:
                    line = json.loads(raw)
                except json.JSONDecodeError:
                    if raw.endswith(b"\n"):
                        raise ValueError(f"{self.path}: line {number} is not JSON") from None
                    break  # the last line, cut by the kill
                _track_unanswered(line, replayed.unanswered)
                if start >= since:
                    _apply(line, replayed)
                start += len(raw)
        return replayed

    def close(self) -> None:
        self._file.close()


def _track_unanswered(line: dict[str, Any], unanswered: set[CacheKey]) -> None:
    if "paid" in line:
        unanswered.add(decode_key(line["paid"]))
    elif "done" in line:
        unanswered.discard(decode_key(line["done"]))
    elif "failed" in line:
        unanswered.discard(decode_key(line["failed"]))


def _apply(line: dict[str, Any], replayed: Replayed) -> None:
    if "paid" in line:
        replayed.paid += 1
    elif "failed" in line:
        replayed.paid -= 1
    elif "done" in line:
        replayed.results[decode_key(line["done"])] = decode_entry(line["entry"])
    elif "demonstrated" in line:
        iteration, component = line["demonstrated"]
        replayed.demonstrations[(iteration, component)] = line["text"]
    else:
        iteration, component = line["reflected"]
        replayed.reflections[(iteration, component)] = line["text"]
