"""Adapter folders on disk: is one whole (a crash never leaves half of one in use)."""

from __future__ import annotations

import json
from pathlib import Path

from infra.lm.adapter_base import ADAPTER_CONFIG, ADAPTER_WEIGHTS


def adapter_files_ok(path: str | Path) -> bool:
    """Whether `path` holds a readable peft adapter config and non-empty weights."""
    path = Path(path)
    weights = path / ADAPTER_WEIGHTS
    try:
        config = json.loads((path / ADAPTER_CONFIG).read_text())
    except (OSError, ValueError):
        return False
    return "peft_type" in config and weights.is_file() and weights.stat().st_size > 0
