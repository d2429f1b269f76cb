"""Moving production: promotion through the gate (`flows.production.gate`), rollback, and
the record of both.

The evidence a night measured (both versions on its held-out examples) is stored with
the version's MLflow run, so `flywheel promote` decides on it later, under the settings
in force then, without a model. It refuses when production moved since: the evidence is
then against the wrong version. Every decision is recorded as tags on the model version,
an MLflow run of its own, and (from the flows in `flows.production.moves`) a Prefect artifact; the
production history is a tag of the registered model. Promoting the version already in
production changes nothing.

A move is a transaction: its intent is written first (a tag of the registered model), then
the aliases move, then the history records it and the intent is cleared. A command cut
anywhere in between leaves the intent, and the next command that reads or moves production
finishes it (`finish_interrupted`), so the aliases always agree and `rollback` always
knows the version before.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flows.production.criteria_gate import CriterionEvidence
from flows.production.gate import Evidence, PromotionDecision, decide
from infra.agents.file_components import variable_of
from infra.agents.prompt_config import split
from infra.registry.mlflow_registry import CANDIDATE, Registry
from infra.settings import PromotionSettings
from infra.traces.prompt_hub import PromptHub
from judges.pairwise_gate import PairwiseEvidence

PRODUCTION = "production"
CANARY = "canary"  # a passing version serving a share of the traffic (`promotion.canary_share`)
EVIDENCE_FILE = "promotion/evidence.json"
HISTORY_TAG = "flywheel.production_history"  # JSON list of moves, oldest first
PENDING_TAG = "flywheel.production_pending"  # JSON of the move under way, until it is recorded
MOVED = ("promoted", "rolled back")  # the actions that move production (and its history)
PROMPTS_TAG = "flywheel.prompt_versions"  # on a model version: registered prompt -> version
ADAPTER_TAG = "flywheel.with_adapter"  # on a model version: "true" when it holds an adapter
MANAGED_TAG = "flywheel.managed_prompt_versions"  # on a model version: the hub's versions
SERVED_TAG = "flywheel.served_model"  # on a model version: the name its server answers to
DECISION = "flywheel.promotion."


@dataclass(frozen=True)
class Move:
    """What a promotion or rollback did, for people and for the record."""

    action: str  # "promoted", "refused", "unchanged", "rolled back"
    version: int | None
    previous: int | None  # production before the move
    reason: str
    by: str
    at: str  # ISO time

    def line(self) -> str:
        target = f"v{self.version}" if self.version is not None else "nothing"
        before = f"v{self.previous}" if self.previous is not None else "none"
        return f"{self.action} {target} (production was {before}; by {self.by}): {self.reason}"


def log_evidence(registry: Registry, evidence: Evidence) -> None:
    """Keep a night's evidence with its run (an active one)."""
    registry.log_dict(dataclasses.asdict(evidence), EVIDENCE_FILE)


def load_evidence(registry: Registry, run_id: str | None) -> Evidence | None:
    """The evidence `log_evidence` kept, its records rebuilt from their JSON (a pairwise
    comparison, each criterion's scores): `flywheel promote` decides on all of it."""
    data = registry.load_run_dict(run_id, EVIDENCE_FILE) if run_id else None
    if not data:
        return None
    pairwise = data.get("pairwise")
    return Evidence(
        **data
        | {
            "pairwise": PairwiseEvidence(**pairwise) if pairwise else None,
            "criteria": tuple(CriterionEvidence(**c) for c in data.get("criteria", ())),
        }
    )


@dataclass(frozen=True)
class Approved:
    """A version its gate let through, not yet production: what `carry_out` moves to."""

    version: int
    previous: int | None  # production now
    tags: dict[str, str]  # the version's
    decision: PromotionDecision
    by: str
    at: str


def review(
    registry: Registry,
    model: str,
    version: int | None,
    cfg: PromotionSettings,
    by: str,
    seed: int = 0,
    decision: PromotionDecision | None = None,
) -> Move | Approved:
    """The gate's answer on `version` (default: the candidate), production untouched: a
    refusal (recorded) or "unchanged" as a `Move`, else what `carry_out` needs (on the
    evidence of its night; `decision`: one the caller just made on that evidence).
    `flows.production.serving.promote` is the one door that composes the two, the server between."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    current = registry.get_alias(model, PRODUCTION)
    version = version if version is not None else registry.get_alias(model, CANDIDATE)
    if version is None:
        return Move("refused", None, current, f"model {model} has no candidate", by, now)
    info = registry.model_version(model, version)
    if info is None:
        return Move("refused", version, current, f"model {model} has no v{version}", by, now)
    if current == version:
        return Move("unchanged", version, current, "it is already production", by, now)
    evidence = load_evidence(registry, info.run_id)
    if evidence is None:
        reason = f"v{version} has no held-out evidence recorded with its night"
        return _refuse(registry, model, version, current, reason, by, now)
    if evidence.production_version != current:
        measured = evidence.production_version
        reason = (
            f"v{version} was measured against {f'v{measured}' if measured else 'the seed prompts'}"
            f", but production is {f'v{current}' if current else 'unset'} now: a night must "
            "measure it again"
        )
        return _refuse(registry, model, version, current, reason, by, now)
    decision = decision or decide(evidence, cfg, seed)
    if not decision.passed:
        return _refuse(registry, model, version, current, decision.reason, by, now)
    return Approved(version, current, info.tags, decision, by, now)


def carry_out(
    registry: Registry,
    model: str,
    approved: Approved,
    hub: PromptHub | None = None,
    served: str | None = None,
) -> Move:
    """Point production (prompts, the hub's labels, the model) at an approved version;
    `served`: the model name its server answers to, for prompts the hub must publish."""
    a = approved
    move = Move("promoted", a.version, a.previous, a.decision.reason, a.by, a.at)
    _move_production(registry, model, move, a.decision, hub, served)
    return move


def refuse(registry: Registry, model: str, approved: Approved, reason: str) -> Move:
    """Refuse an approved version after all (its server could not serve it), recorded."""
    a = approved
    return _refuse(registry, model, a.version, a.previous, reason, a.by, a.at)


def decline(registry: Registry, model: str, version: int, by: str) -> Move:
    """Record that a person did not approve a candidate that passed its gate."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    current = registry.get_alias(model, PRODUCTION)
    return _refuse(registry, model, version, current, "not approved", by, now)


def rollback_target(registry: Registry, model: str) -> int | None:
    """The version production would roll back to; None: there is none before it."""
    current = registry.get_alias(model, PRODUCTION)
    stack = production_stack(history(registry, model))
    return stack[-2] if current is not None and len(stack) >= 2 else None


def rollback(
    registry: Registry, model: str, by: str, hub: PromptHub | None = None, served: str | None = None
) -> Move:
    """Move production (model and prompt aliases) back to the version before it."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    current = registry.get_alias(model, PRODUCTION)
    target = rollback_target(registry, model)
    if target is None:
        return Move("unchanged", current, current, "no earlier production version", by, now)
    move = Move("rolled back", target, current, f"back from v{current}", by, now)
    _move_production(registry, model, move, None, hub, served)
    return move


def finish_interrupted(registry: Registry, model: str, hub: PromptHub | None = None) -> Move | None:
    """The move a cut command left under way, finished; None: none was. Finished, not
    reverted: its gate passed (or a person asked for the rollback) and its server answered
    it before the intent was written, agents may read its prompts already (they move
    first), and every step of a move is safe to do again, while undoing one would need
    what each alias held before it."""
    raw = registry.model_tag(model, PENDING_TAG)
    if not raw:
        return None
    pending = json.loads(raw)
    move, gate = Move(**pending["move"]), pending["decision"]
    decision = PromotionDecision(**gate) if gate else None
    _complete(registry, model, move, decision, hub, pending["served"])
    return move


def history(registry: Registry, model: str) -> list[dict]:
    """Every promotion and rollback of `model`, oldest first."""
    raw = registry.model_tag(model, HISTORY_TAG)
    return json.loads(raw) if raw else []


def production_stack(moves: list[dict]) -> list[int]:
    """The production versions in force, oldest first: a promotion pushes, a rollback pops."""
    stack: list[int] = []
    for move in moves:
        if move["action"] == "promoted":
            stack.append(move["version"])
        elif move["action"] == "rolled back" and stack:
            stack.pop()
    return stack


def served_model(model: str, version: int, tags: dict[str, str], base_model: str) -> str:
    """The model name a serving server answers a version under: its adapter's own name
    (never an earlier version's, so no name is ever reloaded with other weights), or the
    base model's for a version of prompts only."""
    return f"{model}-v{version}" if tags.get(ADAPTER_TAG) == "true" else base_model


def publish_managed(
    registry: Registry,
    hub: PromptHub,
    model: str,
    version: int,
    prompts: dict[str, str],
    labels: list[str],
    served: str | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, int]:
    """New versions of the managed prompts for a model version, named for each other: the
    hub's commit message names the MLflow version, a tag of it the hub's versions; `served`
    (the model name the version is served under) goes in each prompt's `config.model`,
    so an agent that reads its prompt calls the weights that were measured with it, and
    `config`'s keys beside it (a canary's share). Its tools' descriptions and fixed
    placeholders' messages go in its config too (`infra.agents.prompt_config`)."""
    made, extra = {}, config or {}
    production = hub.production() if any(variable_of(c) for c in prompts) else {}
    texts, configs = split(prompts, {c: p.variables() for c, p in production.items()})
    for component, text in texts.items():
        if component in hub.names:
            own = ({"model": served} if served else {}) | extra | configs.get(component, {})
            found = hub.publish(
                component, text, labels, f"flywheel: MLflow model {model} v{version}", own
            )
            made[found.name] = found.version
    registry.set_model_version_tags(model, version, {MANAGED_TAG: json.dumps(made)})
    return made


def hub_versions(tags: dict[str, str]) -> dict[str, int] | None:
    """A model version's Langfuse prompt versions (name -> version) from its tags; None:
    it was registered before the agent read its prompts there."""
    return json.loads(tags.get(MANAGED_TAG, "null"))


def hub_pages(hub: PromptHub | None, versions: dict[str, int]) -> dict[str, str]:
    """Each Langfuse prompt version ("name vN") and its page in Langfuse's UI, for links."""
    if hub is None:
        return {}
    return {f"{name} v{v}": hub.page(name, v) for name, v in versions.items()}


def _move_production(
    registry: Registry,
    model: str,
    move: Move,
    decision: PromotionDecision | None,
    hub: PromptHub | None,
    served: str | None,
) -> None:
    """The intent first, everything `finish_interrupted` needs to complete the move, then
    the move itself."""
    pending = {
        "move": dataclasses.asdict(move),
        "decision": dataclasses.asdict(decision) if decision else None,
        "served": served,
    }
    registry.set_model_tag(model, PENDING_TAG, json.dumps(pending))
    _complete(registry, model, move, decision, hub, served)


def _complete(
    registry: Registry,
    model: str,
    move: Move,
    decision: PromotionDecision | None,
    hub: PromptHub | None,
    served: str | None,
) -> None:
    """Aliases, record, intent cleared: each step safe to redo after a cut."""
    info = registry.model_version(model, move.version)
    _point_production(registry, model, move.version, info.tags if info else {}, hub, served)
    _record(registry, model, move, decision)
    registry.delete_model_tag(model, PENDING_TAG)


def _point_production(
    registry: Registry,
    model: str,
    version: int,
    tags: dict[str, str],
    hub: PromptHub | None,
    served: str | None = None,
) -> None:
    # the prompts first: an agent reading its prompt by alias never sees a half-moved version
    prompt_versions = json.loads(tags.get(PROMPTS_TAG, "{}"))
    for name, prompt_version in prompt_versions.items():
        registry.set_prompt_alias(name, PRODUCTION, prompt_version)
    if hub is not None and hub.names:
        managed = hub_versions(tags)
        if managed is None:  # registered before the hub: its texts go there now
            prefix = f"{registry.settings.prompt_name}-"
            texts = {
                name.removeprefix(prefix): registry.load_prompt(f"prompts:/{name}/{v}")
                for name, v in prompt_versions.items()
            }
            publish_managed(registry, hub, model, version, texts, [PRODUCTION], served)
        else:
            for name, managed_version in managed.items():
                hub.label(name, managed_version, [PRODUCTION])
    registry.set_model_alias(model, PRODUCTION, version)


def record_aside(registry: Registry, model: str, move: Move) -> None:
    """A decision that leaves production where it is (a canary published or rolled back),
    recorded like a move: on the version and as an MLflow run, never in the history that
    `rollback` walks."""
    _record(registry, model, move, None)


def _refuse(
    registry: Registry, model: str, version: int, current: int | None, reason: str, by: str, at: str
) -> Move:
    move = Move("refused", version, current, reason, by, at)
    _record(registry, model, move, None)
    return move


def _record(registry: Registry, model: str, move: Move, decision: PromotionDecision | None) -> None:
    """On the version (tags), as an MLflow run, and (moves only) in the model's history,
    last: what makes a move done, so it is written once, and only after the rest."""
    fields = {"decision": move.action, "by": move.by, "at": move.at, "reason": move.reason}
    fields["previous"] = str(move.previous) if move.previous is not None else "none"
    registry.set_model_version_tags(
        model, move.version, {DECISION + k: v for k, v in fields.items()}
    )
    # a move finished after a cut finds the run it logged before; a refusal is never redone
    start = registry.start_or_resume_run if move.action in MOVED else registry.start_run
    name = f"{move.action.replace(' ', '-')}-v{move.version}"
    with start(name, {"flywheel.move": move.action, "flywheel.move.at": move.at}):
        registry.log_params(
            {f"promotion.{k}": v for k, v in fields.items()} | {"promotion.version": move.version}
        )
        if decision is not None:
            gain = {"gain": decision.gain}
            if decision.low is not None:
                gain |= {"gain_low": decision.low, "gain_high": decision.high}
            registry.log_metrics(gain)
    if move.action in MOVED:
        moves = history(registry, model)
        if dataclasses.asdict(move) not in moves[-1:]:  # recorded already, before a cut
            moves.append(dataclasses.asdict(move))
            registry.set_model_tag(model, HISTORY_TAG, json.dumps(moves[-50:]))
