"""The run's call journal: every metric call logged before it is paid, every result as it
lands, every reflection's text, so a run killed at any moment resumes within its budget.

`run_dir/calls.jsonl` is append-only, one JSON object per line:
  {"paid": key}                       written when the call is charged, before it runs
  {"done": key, "entry": {...}}       its result (score; output and trajectory if JSON)
  {"failed": key}                     every try failed (`CallFailed`): its charge comes back
  {"reflected": [iteration, component], "text": "..."}
  {"demonstrated": [iteration, component], "text": "..."}   drawn from the pool, no LM call
A line reaches the operating system when written, so a SIGKILL loses none of it (only a
power cut could, which `RunStore`'s fsynced snapshots cover up to the last save). The
snapshot records the journal's length when it was taken; a resumed run counts the calls
paid after it (in flight at the kill included: paid, and never answered) and takes back
the results and reflections logged after it, so it pays for nothing twice and never more
than the budget in all.
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
        """Everything logged from byte `since` on (a line cut short by a kill is skipped)."""
        replayed = Replayed()
        with self.path.open("rb") as file:
            file.seek(since)
            for number, raw in enumerate(file, start=1):
                try:
                    line = json.loads(raw)
                except json.JSONDecodeError:
                    if raw.endswith(b"\n"):
                        raise ValueError(
                            f"{self.path}: line {number} after byte {since} is not JSON"
                        ) from None
                    break  # the last line, cut by the kill
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
        return replayed

    def close(self) -> None:
        self._file.close()
