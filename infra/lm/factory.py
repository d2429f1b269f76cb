"""Pick the `LM` backend the settings name."""

from __future__ import annotations

from infra.lm.protocol import AdapterLM
from infra.settings import LMSettings


def make_lm(settings: LMSettings) -> AdapterLM:
    """LocalLM (in process) or OpenAILM (any OpenAI-compatible server); imports lazily so
    the OpenAI backend never loads torch."""
    if settings.backend == "local":
        from infra.lm.engine.local import LocalLM

        return LocalLM(settings)
    from infra.lm.openai_lm import OpenAILM

    return OpenAILM(settings)
