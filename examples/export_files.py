"""What the examples' trace builders share: writing a Langfuse JSONL export's files and
the figures they print about it."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def share(flags: list[bool]) -> str:
    """'12/40 = 30.0%'."""
    return f"{sum(flags)}/{len(flags)} = {sum(flags) / max(len(flags), 1):.1%}"
