"""`flywheel status`: what is in production, the candidate against it, what awaits
approval, the production history and the last nights, from the MLflow registry alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from flows.promotion import (
    ADAPTER_TAG,
    CANDIDATE,
    DECISION,
    PRODUCTION,
    PROMPTS_TAG,
    SERVED_TAG,
    history,
)
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from judges.judge import version_label
from judges.pointwise import SEED_JUDGE_PROMPTS
from judges.versions import JUDGE_PRODUCTION, judge_prompt_name


def status_lines(registry: Registry, settings: Settings, nights: int = 5) -> list[str]:
    model = settings.registry.model_name
    production = registry.get_alias(model, PRODUCTION)
    candidate = registry.get_alias(model, CANDIDATE)
    out = [f"Production: {_version(registry, model, production)}"]
    judge = {}
    for component in SEED_JUDGE_PROMPTS:
        name = judge_prompt_name(registry, component)
        found = registry.prompt_version_at_alias(name, JUDGE_PRODUCTION)
        if found is not None:
            judge[found.name] = found.version
    out.append(f"Judge: {version_label(judge) or 'none at ' + JUDGE_PRODUCTION}")
    if candidate is not None and candidate != production:
        info = registry.model_version(model, candidate)
        tags = info.tags if info else {}
        gate = tags.get("flywheel.gate.reason", "no gate decision recorded")
        decided = tags.get(DECISION + "decision")
        out.append(f"Candidate: {_version(registry, model, candidate)}; gate: {gate}")
        if tags.get("flywheel.gate.passed") == "true" and decided != "refused":
            out.append(f"Awaiting approval: `flywheel promote {candidate}`")
        elif decided:
            out.append(f"Last decision on it: {decided}: {tags.get(DECISION + 'reason', '')}")
    moves = history(registry, model)
    if moves:
        out.append("Production history (newest first):")
        out += [f"  {m['at']}  {m['action']} v{m['version']} by {m['by']}" for m in reversed(moves)]
    runs = registry.recent_runs(nights, name_prefix="nightly-")
    if runs:
        out.append("Last nights:")
        for run in runs:
            started = datetime.fromtimestamp(run.start_time / 1000, UTC).strftime("%Y-%m-%d %H:%M")
            metrics = run.metrics
            gain = metrics.get("heldout_gain_over_production")
            shown = "" if gain is None else f"held-out gain over production {gain:+.3f}"
            if gain is not None and "heldout_gain_low" in metrics:
                shown += f" [{metrics['heldout_gain_low']:.3f}, {metrics['heldout_gain_high']:.3f}]"
            gate = metrics.get("promotion_gate_passed")
            passed = "" if gate is None else ("gate passed" if gate else "gate refused")
            details = ", ".join(x for x in (run.status.lower(), shown, passed) if x)
            out.append(f"  {run.name} ({started} UTC): {details}")
    return out


def _version(registry: Registry, model: str, version: int | None) -> str:
    if version is None:
        return "none (the agent's seed prompts)"
    info = registry.model_version(model, version)
    if info is None:
        return f"{model} v{version} (missing)"
    prompts = version_label(json.loads(info.tags.get(PROMPTS_TAG, "{}")))
    adapter = "with" if info.tags.get(ADAPTER_TAG) == "true" else "no"
    served = info.tags.get(SERVED_TAG)
    shown = f"{model} v{version}: prompts {prompts or '?'}, {adapter} LoRA adapter"
    return shown + (f", served as {served!r}" if served else "")
