"""The JSON form of a `RunSnapshot`: plain types only, exact on the way back (no pickle).

Candidate texts are left out (the store keeps them content-addressed, once per digest);
candidates are named by digest instead.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from gepa_opt.cache import CachedEvaluation, CacheKey, Split
from gepa_opt.events import RejectReason
from gepa_opt.snapshot import NOT_PERSISTED, RunSnapshot
from gepa_opt.state import ProposalRecord
from gepa_opt.types import Candidate, ExampleId, candidate_digest

FORMAT_VERSION = 2
"""Bumped on any change to the document's layout; other versions are refused, not guessed.
Optional keys (objective scores) are written only when present, and absent means none."""


def encode_example_id(example_id: ExampleId) -> str:
    """Tagged, so 3 and "3" stay distinct and come back as the type they went in as."""
    if type(example_id) is int:
        return f"i:{example_id}"
    if type(example_id) is str:
        return f"s:{example_id}"
    raise ValueError(
        f"example id {example_id!r} is a {type(example_id).__name__}; "
        "only int and str example ids can be persisted"
    )


def decode_example_id(tagged: str) -> ExampleId:
    tag, _, value = tagged.partition(":")
    if tag == "i":
        return int(value)
    if tag == "s":
        return value
    raise ValueError(f"example id {tagged!r} has no 'i:' or 's:' tag")


def encode_entry(evaluation: CachedEvaluation) -> dict[str, Any]:
    """A cache entry keeps its score (so it is never paid again); its output and
    trajectory only when plain JSON, since anything else could not come back exact."""
    entry: dict[str, Any] = {"score": evaluation.score}
    if evaluation.objective_scores is not None:
        entry["objective_scores"] = dict(evaluation.objective_scores)
    for name in ("output", "trajectory"):
        if _is_plain_json(value := getattr(evaluation, name)):
            entry[name] = value  # absent on load means NOT_PERSISTED; null means None
    return entry


def decode_entry(entry: dict[str, Any]) -> CachedEvaluation:
    return CachedEvaluation(
        output=entry.get("output", NOT_PERSISTED),
        score=entry["score"],
        trajectory=entry.get("trajectory", NOT_PERSISTED),
        objective_scores=entry.get("objective_scores"),
    )


def encode_key(key: CacheKey) -> list[str]:
    digest, split, example_id = key
    return [digest, Split(split).value, encode_example_id(example_id)]


def decode_key(encoded: list[str]) -> CacheKey:
    digest, split, example_id = encoded
    return digest, Split(split), decode_example_id(example_id)


def to_document(snapshot: RunSnapshot) -> dict[str, Any]:
    cache: dict[str, dict[str, dict[str, Any]]] = {}
    for (digest, split, example_id), evaluation in snapshot.cache.items():
        by_id = cache.setdefault(digest, {}).setdefault(Split(split).value, {})
        by_id[encode_example_id(example_id)] = encode_entry(evaluation)
    if not _is_plain_json(snapshot.extra):
        raise ValueError("RunSnapshot.extra must hold only plain JSON (dict, list, str, ...)")
    return {
        "format_version": FORMAT_VERSION,
        "iteration": snapshot.iteration,
        "idle_iterations": snapshot.idle_iterations,
        "merges_tried": [list(t) for t in snapshot.merges_tried],
        "merges_due": snapshot.merges_due,
        "budget": {
            "max_metric_calls": snapshot.max_metric_calls,
            "metric_calls_used": snapshot.metric_calls_used,
            "reflection_calls": snapshot.reflection_calls,
            "failed_calls": snapshot.failed_calls,
        },
        "candidates": [
            _encode_candidate(candidate, parents, val_scores, objectives, cursor)
            for candidate, parents, val_scores, objectives, cursor in zip(
                snapshot.candidates,
                snapshot.parents,
                snapshot.val_scores,
                snapshot.val_objective_scores,
                snapshot.component_cursor,
                strict=True,
            )
        ],
        "history": [_encode_record(record) for record in snapshot.history],
        "rng_states": {name: _as_lists(state) for name, state in snapshot.rng_states.items()},
        "cache": cache,
        "extra": snapshot.extra,
    }


def from_document(document: dict[str, Any], texts: list[Candidate]) -> RunSnapshot:
    """The inverse of `to_document`, given the texts of `document["candidates"]` in order."""
    cache = {
        (digest, Split(split), decode_example_id(tagged)): decode_entry(entry)
        for digest, by_split in document["cache"].items()
        for split, by_id in by_split.items()
        for tagged, entry in by_id.items()
    }
    candidates, budget = document["candidates"], document["budget"]
    return RunSnapshot(
        candidates=texts,
        parents=[tuple(entry["parents"]) for entry in candidates],
        val_scores=[
            {decode_example_id(i): s for i, s in entry["val_scores"].items()}
            for entry in candidates
        ],
        val_objective_scores=[
            {
                decode_example_id(i): dict(o)
                for i, o in entry.get("val_objective_scores", {}).items()
            }
            for entry in candidates
        ],
        component_cursor=[entry["component_cursor"] for entry in candidates],
        history=[_decode_record(record) for record in document["history"]],
        iteration=document["iteration"],
        idle_iterations=document["idle_iterations"],
        merges_tried=[tuple(t) for t in document["merges_tried"]],
        merges_due=document["merges_due"],
        max_metric_calls=budget["max_metric_calls"],
        metric_calls_used=budget["metric_calls_used"],
        reflection_calls=budget["reflection_calls"],
        failed_calls=budget.get("failed_calls", 0),  # absent before failed calls were counted
        rng_states={name: _as_tuples(state) for name, state in document["rng_states"].items()},
        cache=cache,
        extra=document["extra"],
    )


def _encode_candidate(
    candidate: Candidate,
    parents: tuple[int, ...],
    val_scores: dict[ExampleId, float],
    objectives: dict[ExampleId, dict[str, float]],
    cursor: int,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "digest": candidate_digest(candidate),
        "parents": list(parents),
        "val_scores": {encode_example_id(i): s for i, s in val_scores.items()},
        "component_cursor": cursor,
    }
    if objectives:  # absent means none: a run without objectives keeps the same layout
        entry["val_objective_scores"] = {
            encode_example_id(i): dict(o) for i, o in objectives.items()
        }
    return entry


def _encode_record(record: ProposalRecord) -> dict[str, Any]:
    """Field by field, so a field added to ProposalRecord is saved too (or fails loudly)."""
    encoded = {f.name: _as_lists(getattr(record, f.name)) for f in fields(ProposalRecord)}
    encoded["minibatch_ids"] = [encode_example_id(i) for i in record.minibatch_ids]
    if record.reject_reason is not None:
        encoded["reject_reason"] = record.reject_reason.value
    return encoded


def _decode_record(record: dict[str, Any]) -> ProposalRecord:
    values = {name: _as_tuples(value) for name, value in record.items()}
    values["minibatch_ids"] = tuple(decode_example_id(i) for i in record["minibatch_ids"])
    if record["reject_reason"] is not None:
        values["reject_reason"] = RejectReason(record["reject_reason"])
    return ProposalRecord(**values)


def _is_plain_json(value: Any) -> bool:
    """True when JSON gives back exactly this value, types included (no tuples, no NaN)."""
    if value is None or type(value) in (str, int, bool):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_is_plain_json(item) for item in value)
    if type(value) is dict:
        return all(type(k) is str and _is_plain_json(v) for k, v in value.items())
    return False


def _as_lists(value: Any) -> Any:
    return [_as_lists(item) for item in value] if isinstance(value, tuple) else value


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(item) for item in value) if isinstance(value, list) else value
