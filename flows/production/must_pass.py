"""Must-pass cases: known requests a candidate may never get wrong, whatever its average.

A team keeps its regressions as cases (a JSONL file, `promotion.must_pass_path`, or a
Langfuse dataset, `promotion.must_pass_dataset`). Each is a request and one check on the
reply to it:
- `expected`: the right reply (the agent's own `reference_score` where it has one, else
  the reply equal to it, spacing aside);
- `contains`: a text the reply must hold; `regex`: a pattern it must match (`re.search`);
- `json_schema`: a JSON Schema the reply, read as JSON, must validate against;
- `judge`: a criterion in words, which the night's judge model reads as its rubric.
The candidate runs every case (greedy, with its prompts and adapter), and one failure
refuses its promotion (`flows.production.gate.decide`): the report names the case, what
failed and the reply.

A case's request is `inputs` (the agent's inputs), or, for a replayed agent (whose calls
are re-run from a trace), `trace`: the trace's observations in Langfuse's export shape,
so a case never depends on which traces a night's window holds.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema

from flows.night.collect import one_record_per_trace
from infra.agents import Agent
from infra.lm import LM, ModelCallFailed
from infra.settings import PromotionSettings
from infra.traces.errors import RecordError
from infra.traces.mapping import trace_from_observation
from infra.traces.source import TraceSource, TraceSourceError
from infra.types import Example, Step
from judges.pointwise import PointwiseJudge
from judges.trajectory import judged_request
from judges.types import JudgedItem

CHECKS = ("expected", "contains", "regex", "json_schema", "judge")
# (criterion, request, reply) -> passed, or None where the judge's call failed for good
Criterion = Callable[[str, Example, str], Awaitable[bool | None]]


@dataclass(frozen=True)
class MustPassCase:
    id: str
    example: Example
    check: str  # one of CHECKS
    value: Any  # the expected reply, text, pattern, schema or criterion


@dataclass(frozen=True)
class CaseResult:
    id: str
    passed: bool
    output: str
    why: str  # what a failed check found, one clause

    def sentence(self) -> str:
        shown = self.output if len(self.output) <= 120 else f"{self.output[:117]}..."
        return f"must-pass case {self.id} failed ({self.why}); its reply: {shown!r}"


def configured_cases(
    cfg: PromotionSettings, agent: Agent, traces: TraceSource
) -> list[MustPassCase]:
    """The cases the gate runs: `promotion.must_pass_path`, else
    `promotion.must_pass_dataset`; none otherwise."""
    if cfg.must_pass_path:
        return read_cases(Path(cfg.must_pass_path), agent)
    if cfg.must_pass_dataset:
        name = cfg.must_pass_dataset
        return cases_from_dataset(name, traces.dataset_examples(name))
    return []


def read_cases(path: Path, agent: Agent) -> list[MustPassCase]:
    """The cases in a JSONL file, one per line; a bad line stops the night, naming it."""
    if not path.is_file():
        raise TraceSourceError(f"promotion.must_pass_path: no file at {path}")
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(_case(json.loads(line), agent))
        except json.JSONDecodeError as err:
            raise TraceSourceError(f"{path}:{number}: not valid JSON ({err.msg})") from err
        except RecordError as err:
            raise TraceSourceError(f"{path}:{number}: field {err.field}: {err.message}") from err
    return cases


def cases_from_dataset(name: str, examples: list[Example]) -> list[MustPassCase]:
    """A Langfuse dataset's items as cases: the expected output is the check, unless the
    item's metadata names another (`{"check": {"regex": "..."}}`). An item's input is the
    agent's inputs: a replayed agent's cases, which need their trace, live in a file."""
    cases = []
    for example in examples:
        named = example.metadata.get("check")
        try:
            if named is not None:
                check, value = _check(named)
            elif example.reference is not None:
                check, value = "expected", example.reference
            else:
                raise RecordError("expectedOutput", "an item needs an expected output or a check")
        except RecordError as err:
            raise TraceSourceError(
                f"Langfuse dataset {name!r} item {example.id}: field {err.field}: {err.message}"
            ) from err
        cases.append(MustPassCase(example.id, example, check, value))
    return cases


async def judge_case(
    case: MustPassCase, reply: str, agent: Agent, criterion: Criterion
) -> CaseResult:
    """The case's check on `reply`."""
    value = case.value
    if case.check == "expected":
        score = agent.reference_score(replace(case.example, reference=value), reply)
        passed = _plain(reply) == _plain(value) if score is None else score >= 0.5
        return CaseResult(case.id, passed, reply, f"expected {value!r}")
    if case.check == "contains":
        return CaseResult(case.id, value in reply, reply, f"does not contain {value!r}")
    if case.check == "regex":
        return CaseResult(case.id, bool(re.search(value, reply)), reply, f"no match for {value!r}")
    if case.check == "json_schema":
        return _schema_result(case, reply)
    verdict = await criterion(value, case.example, reply)
    why = "the judge's call failed" if verdict is None else f"the judge found it fails {value!r}"
    return CaseResult(case.id, bool(verdict), reply, why)


async def run_cases(
    agent: Agent,
    lm: LM,
    judge_lm: LM,
    prompts: dict[str, str],
    cases: list[MustPassCase],
    adapter: str | None = None,
    max_tokens: int | None = None,
) -> list[CaseResult]:
    """Each case run greedily by `agent` on `lm` with `prompts` (and `adapter`), its reply
    checked; a `judge` check asks `judge_lm` with the criterion as its rubric. A case whose
    call failed for good fails: what was not run cannot be said to pass."""

    async def one(case: MustPassCase) -> CaseResult:
        params = {"temperature": 0.0} | ({"max_tokens": max_tokens} if max_tokens else {})
        try:
            rollout = await agent.run(case.example, prompts, lm, adapter=adapter, **params)
        except ModelCallFailed as err:
            return CaseResult(case.id, False, "", f"its model call failed: {err}")
        except ValueError as err:  # e.g. a replayed agent given inputs, not a trace
            return CaseResult(case.id, False, "", f"the agent cannot run it: {err}")
        return await judge_case(case, rollout.output, agent, _judged_by(judge_lm, rollout.steps))

    return list(await asyncio.gather(*(one(case) for case in cases)))


def _judged_by(judge_lm: LM, steps: list[Step]) -> Criterion:
    """A `judge` check on `judge_lm`: the criterion as its rubric, the run read as the
    judge reads it (its steps included, `judges.trajectory`)."""

    async def passes(text: str, example: Example, reply: str) -> bool | None:
        judge = PointwiseJudge(judge_lm, {"rubric": text})
        item = JudgedItem(example.id, judged_request(example, steps), reply)
        (p,) = await judge.p_pass_many([item])
        return None if p is None else judge.passes(p)

    return passes


def _schema_result(case: MustPassCase, reply: str) -> CaseResult:
    try:
        jsonschema.validate(json.loads(reply), case.value)
    except json.JSONDecodeError as err:
        return CaseResult(case.id, False, reply, f"not JSON ({err.msg})")
    except jsonschema.ValidationError as err:
        return CaseResult(case.id, False, reply, f"against its JSON schema: {err.message}")
    return CaseResult(case.id, True, reply, "valid against its JSON schema")


def _case(record: Any, agent: Agent) -> MustPassCase:
    if not isinstance(record, dict):
        raise RecordError("(line)", "a case is a JSON object")
    case_id = record.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise RecordError("id", "a case needs a non-empty string id")
    checks = {k: record[k] for k in CHECKS if k in record}
    if len(checks) != 1:
        raise RecordError("check", f"case {case_id}: exactly one of {', '.join(CHECKS)}")
    check, value = _check(checks)
    return MustPassCase(case_id, _request(record, case_id, agent), check, value)


def _check(named: Any) -> tuple[str, Any]:
    """(check, value) from `{check: value}`, the value's type checked."""
    if not isinstance(named, dict) or len(named) != 1 or next(iter(named)) not in CHECKS:
        raise RecordError("check", f"name exactly one of {', '.join(CHECKS)}")
    check, value = next(iter(named.items()))
    if check == "json_schema":
        if not isinstance(value, dict):
            raise RecordError("json_schema", "a JSON Schema is an object")
        try:
            jsonschema.validators.validator_for(value).check_schema(value)
        except jsonschema.SchemaError as err:
            raise RecordError("json_schema", f"not a valid JSON Schema: {err.message}") from err
    elif not isinstance(value, str) or not value:
        raise RecordError(check, "a non-empty text")
    elif check == "regex":
        try:
            re.compile(value)
        except re.error as err:
            raise RecordError("regex", f"not a valid pattern: {err}") from err
    return check, value


def _request(record: dict[str, Any], case_id: str, agent: Agent) -> Example:
    """The case's example: its `inputs`, or its recorded `trace` as the agent reads one."""
    if isinstance(record.get("inputs"), dict):
        return Example(case_id, record["inputs"])
    trace = record.get("trace")
    if not isinstance(trace, list) or not trace:
        raise RecordError("inputs", f"case {case_id}: `inputs` (an object) or `trace` (a list)")
    records = one_record_per_trace([trace_from_observation(o) for o in trace], [])
    if len(records) != 1:
        raise RecordError("trace", f"case {case_id}: the observations of one trace")
    example = agent.example_from_trace(records[0])
    return Example(case_id, example.inputs, example.reference, example.metadata)


def _plain(text: str) -> str:
    return " ".join(text.split())
