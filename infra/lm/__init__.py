"""Model backends behind one async `LM` protocol."""

from infra.lm.faults import FaultTally, ModelCallFailed, StageFaults, current_stage
from infra.lm.protocol import LM, AdapterLM, Completion, Message, Usage

__all__ = [
    "LM",
    "AdapterLM",
    "Completion",
    "FaultTally",
    "Message",
    "ModelCallFailed",
    "StageFaults",
    "Usage",
    "current_stage",
]
