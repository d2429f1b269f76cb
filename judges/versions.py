"""Judge versions in the MLflow prompt registry: one registered prompt per judge component
(`<prompt_name>-judge-rubric`), a new version every night, alias judge-production on the
one the gate last passed. A secondary criterion's judge (`traces.criteria`) is registered
the same way under names of its own (`<prompt_name>-judge-<criterion>-rubric`), so each
criterion's judge has its own versions and its own alias.

Each version carries, as tags, what is needed to trust it and to reload it: held-out
agreement, the calibrated threshold and the score scale it answers on (a rubric without
them is not the same judge), where its LoRA adapter or reward head lies in MLflow, the
annotation window it learned from, and the gate's outcome.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tempfile
from datetime import datetime
from pathlib import Path

from infra.lm.adapter_base import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from infra.registry.mlflow_registry import RegisteredPrompt, Registry, RegistryError
from infra.scales import ScoreScale
from judges.align import Alignment
from judges.gate import GateDecision
from judges.judge import Judge
from judges.reward_head import FILE as HEAD_FILE
from judges.types import LabelWindow

JUDGE_PRODUCTION = "judge-production"
TAG = "flywheel.judge."
THRESHOLD_TAG = TAG + "threshold"
SCALE_TAG = TAG + "scale"  # the ScoreScale as JSON; a version without it is pass/fail
ADAPTER_TAG = TAG + "adapter"  # where its LoRA adapter lies in MLflow (a runs:/ URI)
ADAPTER_ARTIFACT = "judge-adapter"  # the artifact folder that URI names
HEAD_TAG = TAG + "head"  # where its reward head lies in MLflow (a runs:/ URI)
HEAD_ARTIFACT = "judge-head"  # the artifact folder that URI names


def judge_prompt_name(registry: Registry, component: str, criterion: str = "") -> str:
    """The registered prompt of a judge component; `criterion`: a secondary criterion's
    judge ("" the primary's, whose names predate criteria), its annotation name with what
    an MLflow prompt name cannot hold (a space, a slash) as "-"."""
    if not criterion:
        return registry.prompt_name(f"judge-{component}")
    return registry.prompt_name(f"judge-{re.sub(r'[^A-Za-z0-9_.-]+', '-', criterion)}-{component}")


def judge_tags(
    run_id: str, alignment: Alignment, window: LabelWindow, decision: GateDecision
) -> dict[str, str]:
    """The tags of a night's judge version; also logged as params of the night's run."""
    judge = alignment.judge
    tags = {
        "flywheel.run_id": run_id,
        THRESHOLD_TAG: repr(judge.threshold),  # repr: reloads as exactly the same float
        SCALE_TAG: scale_json(judge.scale),
        TAG + "gate": "passed" if decision.passed else "failed",
        TAG + "gate_reason": decision.reason,
        TAG + "window.labels": str(window.labels),
        TAG + "window.first_label": _stamp(window.first),
        TAG + "window.last_label": _stamp(window.last),
        TAG + "window.since": _stamp(window.since),
        TAG + "window.fetched_at": _stamp(window.fetched_at),
    }
    tags |= {f"{TAG}labels.{split}": str(n) for split, n in alignment.sizes.items()}
    tags |= {f"{TAG}heldout.{key}": f"{value:.4f}" for key, value in judge.heldout.items()}
    return tags


def log_judge_adapter(registry: Registry, run_id: str, folder: str) -> str:
    """The judge's adapter as artifacts of the night's judge run (`judge-<run id>`), so
    that a version's tag can point at it; its URI."""
    tags = {"flywheel.run_id": run_id, "flywheel.kind": "judge"}
    return registry.log_folder(f"judge-{run_id}", tags, Path(folder), ADAPTER_ARTIFACT)


def log_judge_head(registry: Registry, run_id: str, folder: str) -> str:
    """The judge's reward head (and the notes it reads) as artifacts of the night's judge
    run, beside where an adapter would be; its URI."""
    tags = {"flywheel.run_id": run_id, "flywheel.kind": "judge"}
    return registry.log_folder(f"judge-{run_id}", tags, Path(folder), HEAD_ARTIFACT)


def register_judge(
    registry: Registry,
    run_id: str,
    prompts: dict[str, str],
    tags: dict[str, str],
    passed: bool,
    criterion: str = "",
) -> dict[str, int]:
    """A new version of each judge component (tags name its adapter or head, if any: rubric
    and adapter, or rubric and head, are one version); alias judge-production only if it
    passed."""
    versions = {}
    for component, text in prompts.items():
        name = judge_prompt_name(registry, component, criterion)
        versions[name] = registry.register_prompt(
            name, text, commit_message=f"flywheel night {run_id}", tags=tags
        )
    if passed:  # only after every component is in, so the alias never points at half a judge
        for name, version in versions.items():
            registry.set_prompt_alias(name, JUDGE_PRODUCTION, version)
    return versions


def production_judge(
    registry: Registry, components: list[str], adapter_dir: Path | None = None, criterion: str = ""
) -> Judge | None:
    """The judge at alias judge-production with its stored threshold, scale, and adapter
    or reward head (downloaded under `adapter_dir`; its agreement is for the caller to
    measure on tonight's labels); None on the first night (or when a component has no
    production version). `criterion`: a secondary criterion's judge."""
    found = {
        c: registry.prompt_version_at_alias(
            judge_prompt_name(registry, c, criterion), JUDGE_PRODUCTION
        )
        for c in components
    }
    if any(v is None for v in found.values()):
        return None
    first = found[components[0]]
    raw = first.tags.get(THRESHOLD_TAG)
    try:
        threshold = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        threshold = math.nan
    if not math.isfinite(threshold):
        raise RegistryError(
            f"Prompt {first.name} v{first.version} (alias {JUDGE_PRODUCTION}) has no valid "
            f"tag {THRESHOLD_TAG} (got {raw!r}): point the alias at a version flywheel "
            "registered, or delete the alias to start over."
        )
    where = (adapter_dir or Path(tempfile.mkdtemp())) / f"{first.name}-v{first.version}"
    adapter = _artifact(registry, first, ADAPTER_TAG, where / ADAPTER_ARTIFACT)
    head = _artifact(registry, first, HEAD_TAG, where / HEAD_ARTIFACT)
    return Judge(
        prompts={c: v.template for c, v in found.items()},
        scale=_stored_scale(first),
        threshold=threshold,
        versions={v.name: v.version for v in found.values()},
        heldout=_recorded(first.tags, TAG + "heldout."),  # as measured when it was made
        adapter=adapter,
        head=head,
        # the newest label it learned from, on the source's clock as every label time is
        # (the fetch time is this host's); a version with no label stamp: its fetch time
        made_at=_moment(first.tags.get(TAG + "window.last_label"))
        or _moment(first.tags.get(TAG + "window.fetched_at")),
    )


def _artifact(registry: Registry, version: RegisteredPrompt, tag: str, local: Path) -> str | None:
    """The local folder of the adapter or head the version's `tag` names (None: no tag),
    downloaded to `local` unless a whole copy is there already: a night reads the judge
    in use twice (the watch, the gate), and one download serves both."""
    if (uri := version.tags.get(tag)) is None:
        return None
    files = (ADAPTER_CONFIG, ADAPTER_WEIGHTS) if tag == ADAPTER_TAG else (HEAD_FILE,)
    if all((local / f).is_file() for f in files):
        return str(local)
    return str(registry.download(uri, local.parent))


def scale_json(scale: ScoreScale) -> str:
    return json.dumps(dataclasses.asdict(scale), sort_keys=True)


def scale_from_json(text: str) -> ScoreScale:
    fields = json.loads(text)
    fields["categories"] = tuple(fields.get("categories", ()))  # JSON gives lists back
    if fields.get("values") is not None:
        fields["values"] = tuple(fields["values"])
    return ScoreScale(**fields)


def _stored_scale(version: RegisteredPrompt) -> ScoreScale:
    raw = version.tags.get(SCALE_TAG)
    if raw is None:  # registered before judges followed the annotation's scale
        return ScoreScale("boolean")
    try:
        return scale_from_json(raw)
    except (ValueError, TypeError) as err:  # bad JSON, unknown field, or an invalid scale
        raise RegistryError(
            f"Prompt {version.name} v{version.version} (alias {JUDGE_PRODUCTION}) has an "
            f"invalid tag {SCALE_TAG} ({err}): point the alias at a version flywheel "
            "registered, or delete the alias to start over."
        ) from err


def _recorded(tags: dict[str, str], prefix: str) -> dict[str, float]:
    out = {}
    for key, value in tags.items():
        if key.startswith(prefix):
            try:
                out[key.removeprefix(prefix)] = float(value)
            except ValueError:  # a tag edited by hand: not a figure to compare with
                continue
    return out


def _moment(stamp: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp) if stamp else None
    except ValueError:  # "none", or edited by hand
        return None


def _stamp(moment: datetime | None) -> str:
    return moment.isoformat() if moment else "none"
