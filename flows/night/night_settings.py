"""The settings a night's results are computed under, kept in its folder at its first
start, and what `flywheel run --resume` may change. A setting that changes how the night
runs, not what it computes, may change; one that changes what it computes may not: the
finished stages a resume reuses were computed under the first value, and the night would
register a mix of both under params that name one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from infra.errors import UserFacingError
from infra.registry.mlflow_registry import safe_params
from infra.settings import Settings

FIRST_START = "settings.json"  # in the night's folder: its settings as it first started

# The result-neutral settings (`safe_params` keys; `*` matches any part). A timeout, a
# retry or a network knob decides how long a call may take and how often it is tried, not
# its answer; a model's concurrency decides how many calls share a batch, and a reply does
# not depend on its batch (the engine is batch-invariant, `lm.batch_invariant`), while
# GEPA's own (`judge.max_concurrency`, `agent_opt.max_concurrency`) shapes its search, so
# it is not listed; prices only count the cost; the state folder's place and upkeep, and
# the serving server's grace period, decide where things are kept and for how long. Every
# other setting, and one added later, changes results until it is listed here.
NEUTRAL = (
    "*.timeout_s",
    "*.max_retries",
    "lm.max_concurrency",
    "reflection.max_concurrency",
    "judge_lm.max_concurrency",
    "*.prompt_price_per_million",
    "*.completion_price_per_million",
    "network.*",
    "state_dir",
    "state.*",
    "serving.unload_after_s",
)


def result_neutral(key: str) -> bool:
    return any(fnmatch(key, pattern) for pattern in NEUTRAL)


@dataclass(frozen=True)
class NightSettings:
    """What the night's MLflow run logs: `params`, as the night first started (and any
    setting that start did not have yet, flywheel being updated since); `changed`, the
    result-neutral settings a resume runs with other values, as tags (a tag, unlike a
    param, may change again at the next resume)."""

    params: dict[str, str]
    changed: dict[str, str]

    def tags(self) -> dict[str, str]:
        return {f"flywheel.resumed_with.{key}": value for key, value in self.changed.items()}


def night_settings(run_dir: Path, settings: Settings) -> NightSettings:
    """These settings beside those the night in `run_dir` first started with (kept now,
    when this is that start). A resume that changes a result-changing setting is refused
    with one sentence naming each and both its values."""
    now = safe_params(settings)
    kept = run_dir / FIRST_START
    if not kept.exists():
        kept.write_text(json.dumps(now, indent=1))
        return NightSettings(now, {})
    first = json.loads(kept.read_text())
    changed = sorted(key for key in first.keys() & now.keys() if first[key] != now[key])
    refused = [key for key in changed if not result_neutral(key)]
    if refused:
        shown = "; ".join(f"{key} {first[key]!r} -> {now[key]!r}" for key in refused)
        raise UserFacingError(
            f"Night {run_dir.name} cannot resume with {shown}: its finished stages were "
            "computed with the first value; set it back, or start a new night without "
            "--resume."
        )
    return NightSettings(now | first, {key: now[key] for key in changed})
