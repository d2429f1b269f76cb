"""What a run is given, checked before it starts, with errors that name the culprit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gepa_opt.config import GEPAConfig
from gepa_opt.demonstrations import Demonstrations
from gepa_opt.evaluator import Example
from gepa_opt.types import Candidate, DataInst, ExampleId


def identify(
    data: Sequence[DataInst], example_id: Callable[[DataInst], ExampleId] | None, name: str
) -> list[Example]:
    """Pair each example with its id; ids must be unique, or cache hits would cross examples."""
    if len(data) == 0:
        raise ValueError(f"{name} is empty")
    ids = [example_id(x) for x in data] if example_id else list(range(len(data)))
    seen: set[ExampleId] = set()
    for position, i in enumerate(ids):
        if i in seen:
            raise ValueError(f"{name}[{position}]: example id {i!r} is not unique in {name}")
        seen.add(i)
    return list(zip(ids, data, strict=True))


def check_objectives(
    ids: Sequence[ExampleId],
    objectives: dict[ExampleId, dict[str, float]],
    known: set[str] | None,
    frontier: str,
) -> None:
    """Every val example must score the same named objectives: the run's (the seed's), or,
    for the seed itself, every name any example of its batch reports."""
    names = known if known is not None else set().union(*objectives.values())
    need = f"GEPAConfig.frontier={frontier!r} needs objective_scores with the same names"
    if known is not None and not known:
        raise ValueError(
            f"{need} for every val example, but the pool's seed was scored without any "
            "(a run resumed from one saved with frontier='instances'?)"
        )
    if not names:
        raise ValueError(
            f"valset example {ids[0]!r} has no objective_scores; {need} for every val "
            "example (EvaluationBatch.objective_scores)"
        )
    for i in ids:
        got = set(objectives.get(i, {}))
        if missing := sorted(names - got):
            raise ValueError(
                f"valset example {i!r}: objective_scores lack objective {missing[0]!r}; "
                f"{need} {sorted(names)} for every val example"
            )
        if extra := sorted(got - names):
            raise ValueError(
                f"valset example {i!r}: objective {extra[0]!r} is not one of the run's "
                f"objectives {sorted(names)}; {need} for every val example"
            )


def check_seed(seed: Candidate, config: GEPAConfig) -> None:
    if not seed:
        raise ValueError("seed_candidate has no components")
    for name, text in seed.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise ValueError(f"seed_candidate[{name!r}] must map a str name to a str text")
    unknown = sorted(set(config.component_prompt_templates) - set(seed))
    if unknown:
        raise ValueError(
            f"GEPAConfig.component_prompt_templates names unknown components {unknown}; "
            f"the seed has {list(seed)}"
        )


def check_demonstrations(
    demonstrations: Demonstrations | None, seed: Candidate, config: GEPAConfig
) -> None:
    """A demonstrations component must be one of the seed's, and is never reflected on."""
    if demonstrations is None:
        return
    if demonstrations.component not in seed:
        raise ValueError(
            f"Demonstrations.component {demonstrations.component!r} is not a component of "
            f"the seed; the seed has {list(seed)}"
        )
    if demonstrations.component in config.component_prompt_templates:
        raise ValueError(
            f"GEPAConfig.component_prompt_templates[{demonstrations.component!r}]: that "
            "component holds demonstrations, drawn from their pool without reflection"
        )
