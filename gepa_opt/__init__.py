"""gepa_opt: GEPA (Genetic-Pareto) reflective prompt optimization, as a standalone library.

Bring an `Adapter` (runs your system on examples, turns traces into feedback records) and
a `ReflectionLM` (prompt in, text out); `optimize` evolves the seed's texts within a
metric-call budget and returns the whole candidate pool. A component that holds few-shot
demonstrations can be declared (`Demonstrations`): it is changed from a pool by the
evidence, with no reflection call.
"""

from gepa_opt.config import GEPAConfig
from gepa_opt.demonstrations import Demo, Demonstrations, chars_over_four
from gepa_opt.engine import GEPAEngine, optimize
from gepa_opt.events import (
    BudgetUsed,
    EventHandler,
    Finished,
    FrontierChanged,
    GEPAEvent,
    MergeTried,
    ProposalAccepted,
    ProposalFinished,
    ProposalRejected,
    ProposalStarted,
    RejectReason,
    StopReason,
)
from gepa_opt.extraction import extract_proposal
from gepa_opt.meta_prompt import DEFAULT_REFLECTION_PROMPT
from gepa_opt.result import GEPAResult, PoolEntry
from gepa_opt.shape import ProposalShape
from gepa_opt.state import ProposalRecord
from gepa_opt.stopping import LMUsage, StopRules, TokenPricing
from gepa_opt.types import (
    Adapter,
    CallFailed,
    Candidate,
    EvaluationBatch,
    ExampleId,
    ReflectionLM,
)

__all__ = [
    "TokenPricing",
    "StopRules",
    "ProposalShape",
    "LMUsage",
    "DEFAULT_REFLECTION_PROMPT",
    "Demo",
    "Demonstrations",
    "Adapter",
    "BudgetUsed",
    "CallFailed",
    "Candidate",
    "EvaluationBatch",
    "EventHandler",
    "ExampleId",
    "Finished",
    "FrontierChanged",
    "GEPAConfig",
    "GEPAEngine",
    "GEPAEvent",
    "GEPAResult",
    "MergeTried",
    "PoolEntry",
    "ProposalAccepted",
    "ProposalFinished",
    "ProposalRecord",
    "ProposalRejected",
    "ProposalStarted",
    "ReflectionLM",
    "RejectReason",
    "StopReason",
    "chars_over_four",
    "extract_proposal",
    "optimize",
]
