"""Registering a night's winner in MLflow: prompt versions and the adapter, under alias
"candidate" when it passed the promotion gate against production
(`flows.production.gate`), with the evidence the gate decided on;
`flows.production.promotion` moves "production". The judge's version was registered
earlier, by its own gate (`judges.choose`); the night's run records which judge it used
and why.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from flows.night.calls import call_metrics
from flows.night.evaluation_runs import log_evaluation_runs
from flows.night.night_settings import night_settings
from flows.night.runtime import Runtime
from flows.night.training_runs import log_training_runs, training_runs
from flows.production.canary_release import SHARE
from flows.production.promotion import (
    ADAPTER_TAG,
    PRODUCTION,
    PROMPTS_TAG,
    SERVED_TAG,
    hub_pages,
    log_evidence,
    publish_managed,
    served_model,
)
from flows.report.figures import prompt_diffs
from flows.report.history import NIGHT_PREFIX
from flows.report.night_report import CANDIDATE, NightReport, Registered
from flows.report.pictures.gepa import curves_figure
from flows.report.summary import render_markdown
from infra.redaction import mask
from infra.registry.mlflow_registry import Registry


def production_prompts(registry: Registry, components: list[str]) -> dict[str, str] | None:
    """The agent's prompts under alias "production", or None if any component has none."""
    prompts = {c: registry.prompt_at_alias(registry.prompt_name(c), PRODUCTION) for c in components}
    return None if None in prompts.values() else prompts


def _register_prompts(
    registry: Registry, prefix: str, prompts: dict[str, str], run_id: str, tags: dict[str, str]
) -> dict[str, int]:
    """One version per component; the version a killed night already registered for this
    run id, with this text, is reused instead of registered twice."""
    versions = {}
    for component, text in prompts.items():
        name = f"{prefix}-{component}"
        versions[name] = registry.find_prompt_version(name, text, tags) or registry.register_prompt(
            name, text, commit_message=f"flywheel night {run_id}", tags=tags
        )
    return versions


def _log_training_sets(
    registry: Registry, report: NightReport, prompt_versions: dict[str, int]
) -> None:
    """Each weight step's training sets as the run's datasets, with their provenance: the
    prompts its rollouts ran (the registered versions when they are the candidate's, else
    the step they came from and their digest), the adapter they were sampled with and
    trained on from, the judge that scored them, and the night's trace window."""
    for step in report.steps:
        if step.lora is None:
            continue
        ran = step.prompts
        provenance = {
            "flywheel.step": str(step.index),
            "flywheel.prompts": json.dumps(prompt_versions, sort_keys=True)
            if ran == report.prompts
            else f"not registered (step {step.started_from}'s prompts)",
            "flywheel.prompts_sha256": hashlib.sha256(
                json.dumps(ran, sort_keys=True).encode()
            ).hexdigest()[:16],
            "flywheel.fst": str(step.fst).lower(),  # rollouts drew prompts from the front
            "flywheel.base_adapter": step.lora.base_adapter or "none (the base model)",
            "flywheel.judge_version": report.gate.judge.label,
            "flywheel.traces_since": report.trace_window.get("since", "unknown"),
            "flywheel.traces_fetched_at": report.trace_window.get("fetched_at", "unknown"),
        }
        for path in map(Path, step.lora.training_sets):
            if path.exists():  # a night resumed on another machine may not have them
                registry.log_training_set(path, f"lora-step{step.index}-{path.stem}", provenance)


def _lineage(report: NightReport) -> dict[str, str]:
    """What the candidate grew from: production's version, and each step's outcome."""
    production = report.evidence.production_version if report.evidence else None
    steps = ", ".join(
        f"{s.index}:{s.kind} {'kept' if s.decision.kept else 'dropped'}" for s in report.steps
    )
    weights = [s for s in report.steps if s.lora is not None and s.decision.kept]
    return {
        "flywheel.lineage.production_version": str(production) if production else "none",
        "flywheel.lineage.steps": steps or "none",
        "flywheel.lineage.adapter_from": (weights[-1].lora.trained_from or "the base model")
        if weights
        else "no weight step kept",
    }


def register_versions(rt: Runtime, run_id: str, report: NightReport) -> Registered:
    """The night's MLflow run, its prompt versions and its model version, then the
    "candidate" aliases, all last. Idempotent per run id: a night killed midway and
    resumed finds its run (left RUNNING), its prompt versions and its model version,
    and registers nothing twice; the aliases move only once every version exists."""
    registry, settings, gate = rt.registry, rt.settings, report.gate
    metrics = report.metrics()
    tags = {"flywheel.run_id": run_id}
    with registry.start_or_resume_run(NIGHT_PREFIX + run_id, tags) as run:
        resumed = bool(run.data.metrics)  # a killed night's run: its curves are logged
        logged = night_settings(rt.run_dir(run_id), settings)  # as first started
        registry.log_params(logged.params)
        registry.set_tags(logged.tags())
        # the judge's version tags, and which judge the night ran on
        registry.log_params(
            gate.tags
            | {
                "flywheel.judge.registered": gate.registered_label,
                "flywheel.judge.used": gate.judge.label,
            }
        )
        registry.log_metrics(metrics)
        curves = {"judge": report.alignment.curve}
        curves |= {f"agent_step{k}": stage.curve for k, stage in report.prompt_steps}
        for name, curve in {} if resumed else curves.items():
            for calls, best in curve:  # the optimization curve, step = metric calls spent
                registry.log_metrics({f"{name}_best_val_score": best}, step=calls)
        # each LoRA step's training curve, a child run apiece (logged once per night)
        log_training_runs(registry, training_runs(rt, run_id, report), tags)
        # each held-out evaluation as an MLflow evaluation run, a child run apiece
        evaluation_runs = log_evaluation_runs(registry, report.evals, tags)
        registry.log_text(render_markdown(report), "report.md")
        registry.log_text(prompt_diffs(report), "prompt_diff.md")
        registry.log_figure(curves_figure(report), "optimization_curves.png")
        passed = report.promotion is not None and report.promotion.passed
        hub_versions: dict[str, int] = {}
        if report.evidence is not None:
            log_evidence(registry, report.evidence)
        prefix, model = settings.registry.prompt_name, settings.registry.model_name
        prompt_versions = _register_prompts(registry, prefix, report.prompts, run_id, tags)
        _log_training_sets(registry, report, prompt_versions)
        version_tags = {
            "flywheel.judge_trusted": str(report.judge_trusted).lower(),
            "flywheel.judge_version": gate.judge.label,
            PROMPTS_TAG: json.dumps(prompt_versions, sort_keys=True),
            ADAPTER_TAG: str(report.adapter_path is not None).lower(),
        } | _lineage(report)
        if report.promotion is not None:
            version_tags |= report.promotion.tags()
        model_version = registry.find_model_version(model, tags) or registry.register_model_version(
            model,
            report.adapter_path,
            [f"prompts:/{name}/{v}" for name, v in prompt_versions.items()],
            metrics,
            tags | version_tags,
            alias=None,
        )
        base_model = settings.serving.model or settings.lm.model
        served = served_model(model, model_version, version_tags, base_model)
        registry.set_model_version_tags(model, model_version, {SERVED_TAG: served})
        if passed:  # last, so that "candidate" never names a half-registered night
            for name, version in prompt_versions.items():
                registry.set_prompt_alias(name, CANDIDATE, version)
            registry.set_model_alias(model, CANDIDATE, model_version)
            if rt.prompt_hub is not None:  # a candidate label where the agent reads
                hub_versions = publish_managed(
                    registry,
                    rt.prompt_hub,
                    model,
                    model_version,
                    report.prompts,
                    [CANDIDATE],
                    served if settings.serving.base_url else None,  # a name some server knows
                    _canary_config(settings.promotion.canary_share),
                )
        run_id_mlflow = run.info.run_id
    return Registered(
        tracking_uri=mask(settings.tracking_uri),  # no user:password in the report
        mlflow_run_id=run_id_mlflow,
        prompt_versions=prompt_versions,
        judge_prompt_versions=gate.judge.versions,
        model_name=model,
        model_version=model_version,
        with_adapter=report.adapter_path is not None,
        candidate=passed,
        experiment_id=registry.experiment_id,
        hub_prompts=hub_pages(rt.prompt_hub, hub_versions),
        evaluation_runs=evaluation_runs,
    )


def log_feedback(registry: Registry, report: NightReport) -> None:
    """Add what the feedback stages did to the night's run, after it was registered."""
    if report.registered is None:
        return
    with registry.reopen_run(report.registered.mlflow_run_id):
        if report.feedback:
            registry.log_metrics(report.feedback.metrics())
        registry.log_metrics(call_metrics(report.calls))  # the feedback stage's too
        if report.feedback and report.feedback.disagreements:
            registry.log_table(report.feedback.disagreements, "judge_disagreements.json")
        # report.md with what feedback did: `flows.report.publish`, right after this


def _canary_config(share: float) -> dict[str, float] | None:
    """The share a canary serves, in its prompts' config from the start: a Langfuse version's
    config is fixed once made, and the canary label goes on this very version."""
    return {SHARE: share} if share > 0 else None
