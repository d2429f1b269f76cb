"""Registering a night's winner in MLflow: prompt versions, the judge, the adapter.

Everything goes in under alias "candidate"; only the promotion gate moves "production".
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
    judge_prompt_versions: dict[str, int]
    model_name: str
    model_version: int
    with_adapter: bool

    def describe(self) -> str:
        prompts = ", ".join(f"{name} v{v}" for name, v in self.prompt_versions.items())
        adapter = (
            "prompts + LoRA adapter" if self.with_adapter else "prompts only (no adapter kept)"
        )
        return (
            f"Registered in MLflow ({self.tracking_uri}): model {self.model_name} "
            f"v{self.model_version} ({adapter}), prompts {prompts}, alias '{CANDIDATE}'; "
            f"run {self.mlflow_run_id}."
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
    with registry.start_run(f"nightly-{run_id}", tags=tags) as run:
        registry.log_params(safe_params(settings))
        registry.log_metrics(metrics)
        for name, curve in (("judge", report.judge.curve), ("agent", report.prompt.curve)):
            for calls, best in curve:  # the optimization curve, step = metric calls spent
                registry.log_metrics({f"{name}_best_val_score": best}, step=calls)
        registry.log_text(render_markdown(report), "report.md")
        prompt_versions = _register_prompts(
            registry, settings.registry.prompt_name, report.prompt.prompts, run_id, tags
        )
        judge_versions = _register_prompts(
            registry,
            "judge",
            report.judge.prompts,
            run_id,
            tags
            | {
                "threshold": f"{report.judge.threshold:.4f}",
                "heldout_kappa": f"{report.judge.heldout.get('kappa', float('nan')):.4f}",
            },
        )
        model_version = registry.register_model_version(
            settings.registry.model_name,
            report.lora.adapter_path,
            [f"prompts:/{name}/{v}" for name, v in prompt_versions.items()],
            metrics,
            tags | {"flywheel.judge_trusted": str(report.judge.trusted).lower()},
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
