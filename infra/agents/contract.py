"""Whether an object fits the Agent contract, checked once at start with every misfit named.

`isinstance(obj, Agent)` only says yes or no, and only about names; a night that starts
on an agent whose `run` is not async or whose `seed_prompts()` is not text fails an hour
later, mid-GEPA. Here each member is called or bound the way the night will use it.
"""

from __future__ import annotations

import inspect
from typing import Any

# How the night calls each member: positional arguments, then keywords it may pass.
CALLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "seed_prompts": ((), ()),
    "example_from_trace": (("trace",), ()),
    "run": (("example", "prompts", "lm"), ("temperature", "max_tokens", "adapter", "seed")),
    "reference_score": (("example", "output"), ()),
}


class AgentContractError(TypeError):
    """An agent that does not fit `infra.agents.protocol.Agent`; the message lists why."""


def check_agent(agent: Any, origin: str) -> None:
    """Raise `AgentContractError` naming every way `agent` (loaded from `origin`) does not
    fit the contract: a missing or non-callable member, a signature the night cannot call,
    a `run` that is not `async def`, `seed_prompts()` not a non-empty dict of text, a
    `runs_offline` that is not a bool, a `judge_rubric` that is not text, a
    `demonstrations` that names no seed prompt or comes without `demonstration`."""
    misfits = []
    name = getattr(agent, "name", None)
    if not isinstance(name, str) or not name:
        misfits.append(f"name must be a non-empty str, got {name!r}")
    for member, (positional, keywords) in CALLS.items():
        misfits += _call_misfits(agent, member, positional, keywords)
    if not misfits:  # safe to call now
        misfits += _seed_prompt_misfits(prompts := agent.seed_prompts())
        if not misfits:
            misfits += _demonstration_misfits(agent, prompts)
    offline = runs_offline(agent)
    if not isinstance(offline, bool):
        misfits.append(f"runs_offline must be a bool, got {offline!r}")
    rubric = judge_rubric(agent)
    if rubric is not None and not (isinstance(rubric, str) and rubric.strip()):
        misfits.append(f"judge_rubric must be a non-empty str or absent, got {rubric!r}")
    if misfits:
        lines = "\n".join(f"  - {m}" for m in misfits)
        raise AgentContractError(
            f"agent {origin} ({type(agent).__name__}) does not fit flywheel's Agent contract "
            f"(infra/agents/protocol.py):\n{lines}"
        )


def runs_offline(agent: Any) -> bool:
    """Whether the agent declared that `run` may be called offline, as often as the night
    needs: no live tool with effects or cost (default True: a plain LLM call)."""
    return getattr(agent, "runs_offline", True)


def judge_rubric(agent: Any) -> str | None:
    """What a passing reply is, as the agent's author wrote it (optional): the judge's seed
    rubric where settings give none."""
    return getattr(agent, "judge_rubric", None)


def demonstrations_component(agent: Any) -> str | None:
    """The seed prompt component the agent shows its few-shot demonstrations in, one per
    line (`protocol.Demonstrating`), or None where it declared none."""
    return getattr(agent, "demonstrations", None)


class AgentRefused(RuntimeError):
    """An agent the night must not run: it declared that its `run` reaches live tools."""


def require_offline(agent: Any, origin: str) -> None:
    if not runs_offline(agent):
        raise AgentRefused(
            f"agent {origin} declares runs_offline = False: its run() reaches live tools, "
            "and a night calls it thousands of times (GEPA's evaluations, the weight "
            "step's samples, held-out checks). Have run() use the tool outputs the trace "
            "recorded (put them in the example's inputs in example_from_trace) and set "
            "runs_offline = True; nothing was run."
        )


def _call_misfits(
    agent: Any, member: str, positional: tuple[str, ...], keywords: tuple[str, ...]
) -> list[str]:
    wanted = f"{member}({', '.join([*positional, *(f'{k}=...' for k in keywords)])})"
    fn = getattr(agent, member, None)
    if fn is None:
        return [f"missing {wanted}"]
    if not callable(fn):
        return [f"{member} must be a method {wanted}, got {type(fn).__name__}"]
    out = []
    try:
        inspect.signature(fn).bind(*positional, **dict.fromkeys(keywords))
    except TypeError as err:
        out.append(f"{member} cannot be called as {wanted}: {err}")
    except ValueError:  # no signature to read (a builtin): trust it
        pass
    if member == "run" and not inspect.iscoroutinefunction(fn):
        out.append("run must be `async def` (the night runs many at once)")
    return out


def _demonstration_misfits(agent: Any, prompts: dict[str, str]) -> list[str]:
    """A declared demonstrations component must be a seed prompt, with a way to write one."""
    component = demonstrations_component(agent)
    if component is None:
        return []
    if not isinstance(component, str) or component not in prompts:
        return [
            f"demonstrations must name one of its seed prompts {sorted(prompts)} "
            f"(or be None), got {component!r}"
        ]
    return _call_misfits(agent, "demonstration", ("example", "reply"), ())


def _seed_prompt_misfits(prompts: Any) -> list[str]:
    if not isinstance(prompts, dict) or not prompts:
        return [f"seed_prompts() must return a non-empty dict of str, got {prompts!r}"]
    return [
        f"seed_prompts()[{key!r}] must be a str (a prompt component), got {type(value).__name__}"
        for key, value in prompts.items()
        if not (isinstance(key, str) and isinstance(value, str))
    ]
