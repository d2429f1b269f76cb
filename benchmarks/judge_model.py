"""The model the judge benchmarks read: the project's own `[lm]` settings, so that a larger
judge is one setting away (`FLYWHEEL_LM__MODEL_PATH=/models/my-1.5b make bench-judge-scale`)."""

from __future__ import annotations

from infra.lm.factory import make_lm
from infra.lm.protocol import AdapterLM
from infra.settings import Settings


def judge_lm() -> AdapterLM:
    """The LM the settings name (environment, then `flywheel.toml`), printed so that every
    figure says which model gave it."""
    lm = make_lm(Settings().lm)
    print(f"model: {lm.base_model_path}", flush=True)
    return lm
