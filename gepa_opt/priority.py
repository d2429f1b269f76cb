"""The order in which waiting LM-bound calls get a freed worker slot (`workers.py`)."""

from __future__ import annotations

from gepa_opt.cache import Split


def priority(iteration: int, split: Split) -> tuple[bool, int]:
    """Which waiting call a freed slot serves: minibatch and reflection work first, the
    oldest proposal's first (the next generation waits on it); then valset passes, the
    newest winner's first (a lineage's newest winner is the one likely to lead the pool,
    and the older passes only order what it leads). Valset passes first instead cost the
    depth benchmark time to quality and utilization ("Where D's time goes" in
    docs/benchmarks/gepa-demo.md)."""
    return (True, -iteration) if split is Split.VAL else (False, iteration)
