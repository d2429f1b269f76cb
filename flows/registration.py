"""Registering a night's winner in MLflow: prompt versions and the adapter, under alias
"candidate"; only the promotion gate moves "production". The judge's version was
registered earlier, by its own gate (`flows.judge_gate`); the night's run records which
judge it used and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flows.runtime import Runtime
from infra.registry.mlflow_registry import Registry, safe_params

if TYPE_CHECKING:
    from flows.report import NightReport

CANDIDATE = "candidate"
PRODUCTION = "production"


@dataclass
class Registered:
    tracking_uri: str
    mlflow_run_id: str
    prompt_versions: dict[str, int]  # registered prompt name -> version
    judge_prompt_versions: dict[str, int]  # the judge the night ran on
    model_name: str
    model_version: int
    with_adapter: bool

    def describe(self) -> str:
        prompts = ", ".join(f"{name} v{v}" for name, v in self.prompt_versions.items())
        judge = ", ".join(f"{name} v{v}" for name, v in self.judge_prompt_versions.items())
        adapter = (
            "prompts + LoRA adapter" if self.with_adapter else "prompts only (no adapter kept)"
        )
        return (
            f"Registered in MLflow ({self.tracking_uri}): model {self.model_name} "
            f"v{self.model_version} ({adapter}), prompts {prompts}, alias '{CANDIDATE}', "
            f"judged by {judge or 'an unregistered judge'}; run {self.mlflow_run_id}."
        )


def production_prompts(registry: Registry, components: list[str]) -> dict[str, str] | None:
    """The agent's prompts under alias "production", or None if any component has none."""
    prompts = {c: registry.prompt_at_alias(registry.prompt_name(c), PRODUCTION) for c in components}
    return None if None in prompts.values() else prompts


def _register_prompts(
    registry: Registry, prefix: str, prompts: dict[str, str], run_id: str, tags: dict[str, str]
) -> dict[str, int]:
    versions = {}
    for component, text in prompts.items():
        name = f"{prefix}-{component}"
        version = registry.register_prompt(
            name, text, commit_message=f"flywheel night {run_id}", tags=tags
        )
        registry.set_prompt_alias(name, CANDIDATE, version)
        versions[name] = version
    return versions


def register_versions(rt: Runtime, run_id: str, report: NightReport) -> Registered:
    from flows.report import render_markdown

    registry, settings = rt.registry, rt.settings
    metrics = report.metrics()
    tags = {"flywheel.run_id": run_id}
    judge_versions = report.gate.judge.versions if report.gate else {}
    with registry.start_run(f"nightly-{run_id}", tags=tags) as run:
        registry.log_params(safe_params(settings))
        if report.gate:  # the judge's version tags, and which judge the night ran on
            registry.log_params(
                report.gate.tags
                | {
                    "flywheel.judge.registered": report.gate.registered_label,
                    "flywheel.judge.used": report.gate.judge.label,
                }
            )
        registry.log_metrics(metrics)
        for name, curve in (("judge", report.judge.curve), ("agent", report.prompt.curve)):
            for calls, best in curve:  # the optimization curve, step = metric calls spent
                registry.log_metrics({f"{name}_best_val_score": best}, step=calls)
        registry.log_text(render_markdown(report), "report.md")
        prompt_versions = _register_prompts(
            registry, settings.registry.prompt_name, report.prompt.prompts, run_id, tags
        )
        judge_tags = {"flywheel.judge_trusted": str(report.judge_trusted).lower()}
        if report.gate:
            judge_tags["flywheel.judge_version"] = report.gate.judge.label
        model_version = registry.register_model_version(
            settings.registry.model_name,
            report.lora.adapter_path,
            [f"prompts:/{name}/{v}" for name, v in prompt_versions.items()],
            metrics,
            tags | judge_tags,
        )
        run_id_mlflow = run.info.run_id
    return Registered(
        tracking_uri=settings.tracking_uri,
        mlflow_run_id=run_id_mlflow,
        prompt_versions=prompt_versions,
        judge_prompt_versions=judge_versions,
        model_name=settings.registry.model_name,
        model_version=model_version,
        with_adapter=report.lora.adapter_path is not None,
    )


def log_feedback(registry: Registry, report: NightReport) -> None:
    """Add what the feedback stages did to the night's run, after it was registered."""
    from flows.report import render_markdown

    if report.registered is None:
        return
    with registry.reopen_run(report.registered.mlflow_run_id):
        if report.feedback:
            registry.log_metrics(report.feedback.metrics())
        registry.log_text(render_markdown(report), "report.md")
