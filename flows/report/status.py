"""`flywheel status`: what is in production, the candidate against it, what awaits
approval, the production history and the last nights, from the MLflow registry alone (and
the move a cut command left under way, which the command line finishes first)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flows.production.canary_release import PUBLISHED, ROLLED_BACK, SINCE_TAG
from flows.production.promotion import (
    ADAPTER_TAG,
    CANARY,
    CANDIDATE,
    DECISION,
    PRODUCTION,
    PROMPTS_TAG,
    SERVED_TAG,
    Move,
    history,
)
from flows.report.history import NIGHT_PREFIX
from flows.report.page import PAGE
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from judges.judge import version_label
from judges.pointwise import SEED_JUDGE_PROMPTS
from judges.versions import JUDGE_PRODUCTION, judge_prompt_name


def status_data(
    registry: Registry, settings: Settings, nights: int = 5, finished: Move | None = None
) -> dict[str, Any]:
    """What `flywheel status` shows, as data (`status --json` prints it as it is);
    `finished`: the move a cut command left under way, just finished."""
    model = settings.registry.model_name
    production = registry.get_alias(model, PRODUCTION)
    candidate = registry.get_alias(model, CANDIDATE)
    judge = {}
    for component in SEED_JUDGE_PROMPTS:
        name = judge_prompt_name(registry, component)
        found = registry.prompt_version_at_alias(name, JUDGE_PRODUCTION)
        if found is not None:
            judge[found.name] = found.version
    data: dict[str, Any] = {
        "model": model,
        "finished": finished.line() if finished else None,
        "production": _version(registry, model, production),
        "judge": judge,
        "candidate": None,
        "canary": _version(registry, model, registry.get_alias(model, CANARY)),
        "history": history(registry, model),
        "nights": [
            _night(run, settings.state_dir / "runs")
            for run in registry.recent_runs(nights, name_prefix=NIGHT_PREFIX)
        ],
    }
    if candidate is not None and candidate != production:
        data["candidate"] = _version(registry, model, candidate)
    return data


def status_lines(registry: Registry, settings: Settings, nights: int = 5) -> list[str]:
    return render(status_data(registry, settings, nights))


def render(data: dict[str, Any]) -> list[str]:
    """`status_data` for people."""
    model = data["model"]
    out = []
    if finished := data["finished"]:
        out.append(f"Finished a move a cut command left under way: {finished}")
    out.append(f"Production: {_shown(model, data['production'])}")
    out.append(f"Judge: {version_label(data['judge']) or 'none at ' + JUDGE_PRODUCTION}")
    if (candidate := data["candidate"]) is not None:
        gate = candidate["gate_reason"] or "no gate decision recorded"
        out.append(f"Candidate: {_shown(model, candidate)}; gate: {gate}")
        decided = candidate["decision"]
        if candidate["gate_passed"] and decided not in ("refused", PUBLISHED, ROLLED_BACK):
            out.append(f"Awaiting approval: `flywheel promote {candidate['version']}`")
        elif decided:
            out.append(f"Last decision on it: {decided}: {candidate['decision_reason']}")
    if (canary := data["canary"]) is not None:
        out.append(
            f"Canary: {_shown(model, canary)}, out since {canary['canary_since']}: the next "
            "night promotes it or rolls it back on the traffic it served"
        )
    if moves := data["history"]:
        out.append("Production history (newest first):")
        out += [f"  {m['at']}  {m['action']} v{m['version']} by {m['by']}" for m in reversed(moves)]
    if nights := data["nights"]:
        out.append("Last nights:")
        for night in nights:
            gain = night["heldout_gain"]
            shown = "" if gain is None else f"held-out gain over production {gain:+.3f}"
            if gain is not None and night["heldout_gain_low"] is not None:
                shown += f" [{night['heldout_gain_low']:.3f}, {night['heldout_gain_high']:.3f}]"
            gate = night["gate_passed"]
            passed = "" if gate is None else ("gate passed" if gate else "gate refused")
            details = ", ".join(x for x in (night["status"].lower(), shown, passed) if x)
            out.append(f"  {night['name']} ({night['started']} UTC): {details}")
            if night.get("report"):
                out.append(f"    report: {night['report']}")
    return out


def _night(run, runs: Path) -> dict[str, Any]:
    metrics = run.metrics
    gate = metrics.get("promotion_gate_passed")
    # the night's page, while its folder is on this disk (MLflow keeps it too)
    page = runs / run.name.removeprefix(NIGHT_PREFIX) / PAGE
    return {
        "report": str(page.resolve()) if page.exists() else None,
        "name": run.name,
        "started": datetime.fromtimestamp(run.start_time / 1000, UTC).strftime("%Y-%m-%d %H:%M"),
        "status": run.status,
        "heldout_gain": metrics.get("heldout_gain_over_production"),
        "heldout_gain_low": metrics.get("heldout_gain_low"),
        "heldout_gain_high": metrics.get("heldout_gain_high"),
        "gate_passed": None if gate is None else bool(gate),
    }


def _version(registry: Registry, model: str, version: int | None) -> dict[str, Any] | None:
    if version is None:
        return None
    info = registry.model_version(model, version)
    tags = info.tags if info else {}
    return {
        "version": version,
        "missing": info is None,
        "prompts": json.loads(tags.get(PROMPTS_TAG, "{}")),
        "adapter": tags.get(ADAPTER_TAG) == "true",
        "served_as": tags.get(SERVED_TAG),
        "gate_passed": tags.get("flywheel.gate.passed") == "true",
        "gate_reason": tags.get("flywheel.gate.reason"),
        "decision": tags.get(DECISION + "decision"),
        "decision_reason": tags.get(DECISION + "reason", ""),
        "canary_since": tags.get(SINCE_TAG),
    }


def _shown(model: str, version: dict[str, Any] | None) -> str:
    if version is None:
        return "none (the agent's seed prompts)"
    if version["missing"]:
        return f"{model} v{version['version']} (missing)"
    prompts = version_label(version["prompts"])
    adapter = "with" if version["adapter"] else "no"
    shown = f"{model} v{version['version']}: prompts {prompts or '?'}, {adapter} LoRA adapter"
    return shown + (f", served as {version['served_as']!r}" if version["served_as"] else "")
