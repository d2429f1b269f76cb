"""A canary in the registry, the hub and the serving server: a version that passed its gate
goes out under the `canary` label and alias (`promotion.canary_share`), and a later night's
verdict (`flows.production.canary`) promotes it, rolls it back or keeps it.

Production does not move when a canary goes out, so `rollback` still knows the version
before it; a winning canary is promoted through `serving.promote`, the one door to
production, so its move is recorded like any other (by "canary"). Going out and being
rolled back are recorded beside the moves (`promotion.record_aside`), not in production's
history. The agent, not flywheel, splits the traffic: it reads the share from the canary
prompt's `config.canary_share` (docs/production.md), and each trace's prompt version
tells the next night which label served it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from flows.production import promotion, serving
from flows.production.canary import CanaryDecision
from flows.production.gate import PromotionDecision
from flows.production.promotion import CANARY, PRODUCTION, PROMPTS_TAG, Move
from infra.registry.mlflow_registry import Registry
from infra.settings import PromotionSettings
from infra.traces.prompt_hub import PromptHub

SINCE_TAG = "flywheel.canary_since"  # on a model version: when it went out as the canary
SHARE = "canary_share"  # the key of the share in the canary prompts' config
PUBLISHED, ROLLED_BACK = "published as canary", "canary rolled back"
BY = "canary"


def since(registry: Registry, model: str, version: int) -> datetime | None:
    """When `version` went out as the canary (None: it never did)."""
    info = registry.model_version(model, version)
    stamp = info.tags.get(SINCE_TAG) if info else None
    return datetime.fromisoformat(stamp) if stamp else None


async def publish(
    where: serving.Serving | None,
    registry: Registry,
    model: str,
    version: int,
    share: float,
    reason: str,
    by: str,
    hub: PromptHub | None = None,
) -> Move:
    """Point the canary label and alias at `version` (its server answering it first): a
    canary still out is replaced. Refused, production untouched, when the server cannot
    serve it."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    current = registry.get_alias(model, PRODUCTION)
    served = None
    if where is not None:
        try:
            served = await serving.bring_up(where, registry, model, version)
        except serving.ServingFailed as failure:
            move = Move("refused", version, current, f"no canary: {failure}", by, now)
            promotion.record_aside(registry, model, move)
            return move
    tags = registry.model_version(model, version).tags
    prompt_versions = json.loads(tags.get(PROMPTS_TAG, "{}"))
    for name, prompt_version in prompt_versions.items():
        registry.set_prompt_alias(name, CANARY, prompt_version)
    if hub is not None and hub.names:
        managed = promotion.hub_versions(tags)
        if managed is None:  # registered before the hub: its texts go there now
            prefix = f"{registry.settings.prompt_name}-"
            texts = {
                name.removeprefix(prefix): registry.load_prompt(f"prompts:/{name}/{v}")
                for name, v in prompt_versions.items()
            }
            share_config = {SHARE: share}
            promotion.publish_managed(
                registry, hub, model, version, texts, [CANARY], served, share_config
            )
        else:  # registered with the share in its config (`flows.night.registration`)
            for name, managed_version in managed.items():
                hub.label(name, managed_version, [CANARY])
    registry.set_model_version_tags(model, version, {SINCE_TAG: now})
    registry.set_model_alias(model, CANARY, version)
    move = Move(PUBLISHED, version, current, f"{share:.0%} of the traffic; {reason}", by, now)
    promotion.record_aside(registry, model, move)
    return move


async def settle(
    where: serving.Serving | None,
    registry: Registry,
    model: str,
    version: int,
    decision: CanaryDecision,
    cfg: PromotionSettings,
    hub: PromptHub | None = None,
) -> Move | None:
    """Carry out a night's verdict on the canary `version`: promoted (through the gate's
    door, on the verdict's numbers) or rolled back, each recorded; None: it is kept."""
    if decision.action == "keep":
        return None
    if decision.action == "promote":
        won = PromotionDecision(True, decision.reason, decision.gain, decision.low, decision.high)
        move = await serving.promote(
            where, registry, model, version, cfg, BY, decision=won, hub=hub
        )
        if move.action in ("promoted", "unchanged"):  # production now: no canary any more
            _withdraw(registry, model, version, hub)
        return move
    _withdraw(registry, model, version, hub)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    current = registry.get_alias(model, PRODUCTION)
    move = Move(ROLLED_BACK, version, current, decision.reason, BY, now)
    promotion.record_aside(registry, model, move)
    await serving.tidy(where, registry, model)  # its adapter unloaded: no label serves it
    return move


def _withdraw(registry: Registry, model: str, version: int, hub: PromptHub | None) -> None:
    """The canary label and aliases off `version`: the hub's first, so the agent stops
    sending it traffic before the registry forgets it; each step safe to redo."""
    tags = registry.model_version(model, version).tags
    if hub is not None:
        for name, managed_version in (promotion.hub_versions(tags) or {}).items():
            hub.unlabel(name, managed_version, [CANARY])
    for name in json.loads(tags.get(PROMPTS_TAG, "{}")):
        registry.delete_prompt_alias(name, CANARY)
    registry.delete_model_alias(model, CANARY)
