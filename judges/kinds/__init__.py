"""The kinds of score scale a judge answers on, each a strategy (`kind.py`): pass/fail
(`boolean.py`), categories (`categorical.py`) and numbers (`numeric.py`)."""

from judges.kinds.answered import PASS_CUT
from judges.kinds.boolean import PassFail
from judges.kinds.categorical import Categorical
from judges.kinds.kind import ScaleKind, kind_of
from judges.kinds.numeric import Numeric
from judges.kinds.text import NoVerdict, Value

__all__ = [
    "PASS_CUT",
    "Categorical",
    "NoVerdict",
    "Numeric",
    "PassFail",
    "ScaleKind",
    "Value",
    "kind_of",
]
