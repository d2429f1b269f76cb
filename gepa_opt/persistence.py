"""Durable run state, so a run killed at any moment resumes without paying for anything twice.

A run directory holds `state.json` (a `RunSnapshot` without candidate texts),
`texts/<candidate digest>.json` (each candidate's texts, written once) and `calls.jsonl`
(the call journal past the last snapshot: `journal.py`). Every file is
replaced atomically (temp file in the same directory, fsync, rename) and texts land before
the state naming them, so a crash leaves either the old or the new state, whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from gepa_opt.snapshot import RunSnapshot
from gepa_opt.snapshot_json import FORMAT_VERSION, from_document, to_document
from gepa_opt.types import Candidate, candidate_digest

_TEMP_PREFIX = ".tmp-"


class RunStore:
    """One run directory; a single process writes it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.state_path = self.path / "state.json"
        self.journal_path = self.path / "calls.jsonl"  # `journal.CallJournal`
        self.texts_dir = self.path / "texts"
        self._texts_on_disk: set[str] = set()

    def text_path(self, digest: str) -> Path:
        return self.texts_dir / f"{digest}.json"

    def save(self, snapshot: RunSnapshot) -> None:
        """Persist `snapshot`; cheap to call often (texts already on disk are not written again)."""
        document = to_document(snapshot)
        state_json = _dumps(document)  # before any write, so a bad snapshot changes nothing
        self.texts_dir.mkdir(parents=True, exist_ok=True)
        for candidate, entry in zip(snapshot.candidates, document["candidates"], strict=True):
            digest = entry["digest"]
            if digest not in self._texts_on_disk and not self.text_path(digest).exists():
                _write_atomically(self.text_path(digest), _dumps(candidate))
            self._texts_on_disk.add(digest)
        _write_atomically(self.state_path, state_json)  # last: everything it names is on disk

    def load(self) -> RunSnapshot | None:
        """The last saved snapshot, or None for a fresh run; clears a killed save's temp files."""
        for directory in (self.path, self.texts_dir):
            for leftover in directory.glob(f"{_TEMP_PREFIX}*"):
                leftover.unlink(missing_ok=True)
        if not self.state_path.exists():
            return None
        document = _read_json(self.state_path)
        version = document.get("format_version") if isinstance(document, dict) else None
        if version != FORMAT_VERSION:
            raise ValueError(
                f"{self.state_path}: field 'format_version' is {version!r}; "
                f"this gepa_opt reads version {FORMAT_VERSION}"
            )
        try:
            digests = [entry["digest"] for entry in document["candidates"]]
        except (KeyError, TypeError) as error:
            raise ValueError(f"{self.state_path}: field candidates[].digest: {error!r}") from error
        texts = [self._read_texts(d, f"candidates[{i}].digest") for i, d in enumerate(digests)]
        try:
            return from_document(document, texts)
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise ValueError(f"{self.state_path}: malformed ({error!r})") from error

    def _read_texts(self, digest: str, field: str) -> Candidate:
        path = self.text_path(digest)
        if not path.exists():
            raise ValueError(f"{path}: missing, referenced by {self.state_path} field {field}")
        candidate = _read_json(path)
        if not isinstance(candidate, dict) or candidate_digest(candidate) != digest:
            raise ValueError(f"{path}: content does not match the digest in its name ({field})")
        self._texts_on_disk.add(digest)
        return candidate


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: unreadable JSON ({error})") from error


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never a prefix, even after SIGKILL."""
    fd, temp_path = tempfile.mkstemp(dir=path.parent, prefix=_TEMP_PREFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_path)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(path: Path) -> None:
    """Makes a rename durable across power loss, not just across a killed process."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
