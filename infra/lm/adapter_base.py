"""Which base a saved LoRA adapter belongs to, and whether a model can serve it.

An adapter only loads onto the checkpoint it was trained from. A night whose model changed
(`[lm]` or `[judge_lm]` pointed at another one) still finds last night's adapters in MLflow,
so it asks before it loads one.
"""

from __future__ import annotations

import json
from pathlib import Path

from infra.lm.protocol import LM

# peft's names for an adapter's files
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def trained_on(folder: str | Path) -> str | None:
    """The base checkpoint an adapter was trained from, as its peft config names it
    (None: a config that names none)."""
    config = json.loads((Path(folder) / ADAPTER_CONFIG).read_text())
    return config.get("base_model_name_or_path") or None


def servable_on(lm: LM, folder: str | Path) -> bool:
    """Whether `lm` can serve the adapter: it serves adapters, and runs on the base the
    adapter was trained from (the same folder, or one whose config.json is the same), so a
    night whose model changed does not load last night's adapter onto another one. Where
    either side names no base there is nothing to contradict, and loading decides."""
    if not hasattr(lm, "load_adapter"):
        return False
    base, trained = getattr(lm, "base_model_path", None), trained_on(folder)
    if base is None or trained is None or Path(trained) == Path(base):
        return True
    config = _config(trained)
    return config is not None and config == _config(base)


def _config(checkpoint: str) -> dict | None:
    try:
        return json.loads((Path(checkpoint) / "config.json").read_text())
    except (OSError, ValueError):  # not a local checkpoint folder: nothing to compare
        return None
