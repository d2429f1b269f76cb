"""Model backends behind one async `LM` protocol."""

from infra.lm.calls import CallTally, ModelCallFailed, StageCalls, current_stage
from infra.lm.protocol import LM, AdapterLM, Completion, Message, Usage

__all__ = [
    "LM",
    "AdapterLM",
    "Completion",
    "CallTally",
    "Message",
    "ModelCallFailed",
    "StageCalls",
    "Usage",
    "current_stage",
]
