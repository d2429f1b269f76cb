"""The model the judge benchmarks read: the night's judge model from the project's settings
(`[judge_lm]`, else `[lm]`), so that a larger judge is one setting away
(`FLYWHEEL_JUDGE_LM__MODEL_PATH=/models/my-1.5b make bench-judge-scale`)."""

from __future__ import annotations

from infra.lm.factory import make_lm
from infra.lm.protocol import AdapterLM
from infra.settings import Settings


def judge_lm() -> AdapterLM:
    """The LM the settings name for the judge (environment, then `flywheel.toml`), printed
    so that every figure says which model gave it."""
    lm = make_lm(Settings().judge_model)
    print(f"model: {lm.base_model_path}", flush=True)
    return lm
