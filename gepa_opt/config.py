"""Every knob of a GEPA run in one place (in the spirit of trl's *Config dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from gepa_opt.components import ModuleSelection
from gepa_opt.in_flight import InFlight
from gepa_opt.meta_prompt import REFLECTION_TEMPLATES, ReflectionTemplate, check_template
from gepa_opt.pareto import Frontier, Pruning
from gepa_opt.selection import CandidateSelection
from gepa_opt.shape import ProposalShape
from gepa_opt.stopping import StopRules

Siblings = Literal["auto", "first", "best", "all"]
Reuse = Literal["auto", "always", "never"]


@dataclass
class GEPAConfig:
    """Configuration of `optimize`. Defaults follow the GEPA paper and upstream gepa."""

    max_metric_calls: int = 500
    """Budget B: one call per (candidate, example) evaluated, cache hits free. The run never
    exceeds it; a proposal only starts when its worst case (parent's uncached minibatch +
    child's minibatch + a full valset evaluation) still fits, since a proposal that cannot
    reach the valset cannot add a candidate. The seed's valset evaluation must fit."""

    reflection_minibatch_size: int = 3
    """b: training examples per proposal, shown to the reflection LM."""

    candidate_selection: CandidateSelection = "pareto"
    """"pareto" (Algorithm 2), "current_best" (greedy), or "epsilon_greedy"."""

    epsilon: float = 0.1
    """For "epsilon_greedy": chance of picking a uniformly random pool candidate."""

    frontier: Frontier = "instances"
    """What the Pareto frontier of Algorithm 2 is kept over. "instances" (the paper): one
    key per val example, a candidate is on the front where it has the best score.
    "objectives": one key per named objective of `EvaluationBatch.objective_scores`, a
    candidate is on the front for objective k if it has the best valset mean for k.
    "both": the union of those keys. Parents are sampled in proportion to the keys they
    win among the undominated candidates, and merges pair front candidates, whatever
    the keys; the best candidate is still the highest mean per-instance score. With
    "objectives" or "both", every val evaluation must return objective_scores with the
    same names for each example, or the run stops with a ValueError naming the example
    and the missing objective."""

    module_selection: ModuleSelection = "round_robin"
    """"round_robin": one component per proposal, cycling per candidate (a child goes on
    from the component after the one that made it); "all": every one; "blamed": the one
    the parent's feedback blames (`Adapter.blame`), else round robin. A demonstrations
    component (`optimize(demonstrations=...)`) is drawn from its pool, with no reflection
    call, on its round-robin turns (under "blamed" too: feedback hardly ever blames it)
    and in every proposal under "all"."""

    seed: int = 0
    """Seeds parent selection and minibatch sampling: with a deterministic adapter and
    reflection LM, the same seed replays the same run."""

    skip_perfect_score: bool = True
    """Skip reflecting on a parent already perfect on the whole minibatch: no signal there."""

    refuse_meta_restatements: bool = True
    """Refuse a proposed text that is mostly the reflection meta-prompt's own words rather
    than a rewrite of the component (`gepa_opt.refusal`): small reflection models write
    those, and a noisy metric can let one win."""

    perfect_score: float = 1.0
    """Per-example score that counts as perfect for `skip_perfect_score`."""

    max_concurrency: int = 1
    """W: LM-bound calls in flight at once, all proposals together. Each uncached example
    is one `adapter.evaluate` call and each reflection one `reflection_lm` call, and each
    holds one of W slots. With 1 (and a deterministic adapter and LM whose latencies do
    not reorder the engine's steps) a run replays exactly; set it to what the model
    server can batch or the API allows."""

    proposal_shape: str = "1x1"
    """"PxN": P sibling groups in flight, each one parent and one minibatch with N
    children reflected from them. "1x1" with one slot is the paper's one mutation at a
    time. "auto" picks the shape `runtime_model.auto_shape` predicts fastest per useful
    accepted child from the call latencies, acceptance rate and depth (the share of
    winners that led the pool) measured so far, and re-decides it before every group."""

    in_flight: InFlight = "shape"
    """Whether worker slots that would idle start groups beyond the shape's P: "shape"
    (never) or "front" (only from Pareto-front parents with no group in flight); see
    `in_flight.py`. "shape" is the default because a budget-bound run pays for every
    extra group with depth: on the depth benchmark "front" kept the slots busier and
    ended lower (docs/benchmarks/gepa-depth.md)."""

    siblings: Siblings = "auto"
    """Which children of a group that beat their parent on the minibatch go on to the
    valset: "best" (the largest gain of all N; upstream's BestImprovement), "first" (the
    best of those judged by the time the first one improved: reflections still out then
    are cancelled, so a group waits for its fastest improving child, not its slowest
    reflection), "auto" (default: "first" while the measured reflection latency is at
    least twice a metric call's, else "best"; decided per group), or "all". One valset
    pass per group keeps the budget on depth: siblings mostly propose the same step. On
    the depth benchmark (docs/benchmarks/gepa-depth.md) "first" ended at val 0.747 where "best"
    ended at 0.656 with a reflection endpoint ten times slower than the metric, reached
    upstream's final score sooner at four times (27.6 s against 33.7 s), tied at twice and
    with equal latencies at W = 8, and ended lower at W = 16 (0.637 against 0.678), where
    judging five siblings picks the better child."""

    continue_winners: bool = True
    """A group whose best child won goes on from that child at once, beside its valset
    pass, instead of drawing its next parent once the pass is done: each accepted
    generation then costs the critical path of its minibatches and reflection only. A
    continued group whose children all failed while its parent's pass still runs tries
    that parent again; the other groups draw parents from the Pareto front as usual.
    False: every group draws (the paper's Algorithm 1)."""

    reuse_winning_minibatch: Reuse = "auto"
    """Whether a group continued from a winner reflects on the minibatch that winner just
    won on, and judges its children there: the winner's scores and traces on it are paid
    already, so the group starts with its reflections instead of the parent's minibatch,
    the longest wait of a generation but one. Never twice in a row: the group after draws
    a new minibatch, so a lineage is not tuned to a few examples. The price: the winner's
    score there is the one that made it win, high by luck where minibatch wins are noise,
    so its children must beat a bar set by chance. "always"; "never"; "auto" (default)
    while most winners so far led the pool on the valset (a win that holds up is no luck;
    a prior of one that did). On the depth task the reuse took D/B time to quality from
    0.82 to 0.65 and utilization from 0.80 to 0.87 (docs/benchmarks/gepa-depth.md). Needs
    `continue_winners`."""

    parent_pruning: Pruning = "coverage"
    """Which Pareto-front candidates stay parents (`pareto.py`): "coverage" (upstream's
    code: drop a candidate while every front it is on holds another survivor) or
    "dominance" (the paper's text: only one dominated by another single candidate).
    "coverage" is the default: on the depth benchmark the two ended on the same candidates
    in all 5 seeds; on the demo task "dominance" ended lower in 3 of 5 seeds (mean val
    0.336 against 0.400), weak evidence since that task varies from run to run; and it
    is upstream's behaviour, sampling fewer, stronger parents."""

    reflection_template: ReflectionTemplate = "paper"
    """Which built-in meta-prompt reflection reads (`meta_prompt.py`): "paper" (the GEPA
    paper's, upstream gepa's default) or "rewrite" (the component and the records as a
    plain task, "Rewrite this instruction so that an assistant following it would have
    given the expected output for each input below", answered with the text alone: the
    night's default, `infra.settings.GEPASettings`). With the 1.5B teacher reflecting on 8
    minibatches of the demo's traces (benchmarks/reflection_templates.py,
    docs/benchmarks/2026-12-06-teacher-night.md), "rewrite"'s proposals averaged 0.276
    held-out accuracy against "paper"'s 0.241 (seed 0.286): weak evidence, and neither is
    a good reflector at that size."""

    reflection_prompt_template: str | None = None
    """A meta-prompt of your own, with "<curr_instructions>" and "<inputs_outputs_feedback>"
    placeholders; it replaces `reflection_template`'s. None: the built-in one."""

    component_prompt_templates: dict[str, str] = field(default_factory=dict)
    """Per-component overrides of `reflection_prompt_template` (e.g. a rubric vs a prompt)."""

    use_merge: bool = False
    """GEPA+Merge (paper, appendix B): after a proposal is accepted, try to merge two
    Pareto-front lineages from a common ancestor. Merges run beside mutations."""

    max_merge_invocations: int = 5
    """Merges attempted in a whole run (each costs up to merge_subsample_size + |valset|)."""

    merge_subsample_size: int = 5
    """Val examples a merged candidate is first scored on; the full valset only if it
    matches the better parent there."""

    stop: StopRules = field(default_factory=StopRules)
    """Other ways to end a run: wall time, tokens or cost (with `optimize(usage=...)`), a
    score target, K proposals without improvement, a stop file. Checked when a proposal
    ends and before the next starts; proposals already in flight finish (they are paid)."""

    run_dir: str | None = None
    """Where the run state is saved when a group starts and when a proposal ends (JSON plus
    content-addressed texts, written atomically), beside a journal of every metric call
    (logged as it is sent) and reflection (`journal.py`). If it already holds a state,
    or only a journal, the run resumes from them: same pool, budget, cache and RNG
    streams, the groups that were in flight finished under their own numbers, and the
    pairs paid in all, by every process of the run, never above `max_metric_calls`. A
    call in flight at a kill counts (it was made) and is asked again at no second charge,
    so a budget that fit the fresh run fits every resume of it."""

    max_reflection_calls: int | None = None
    """Reflection-LM calls at most (None: no limit but the metric budget). A group starts
    only with the reflections its children need still free, so a reflection endpoint that
    keeps failing or returning nothing (proposals that cost no metric call) cannot make a
    run spin; the run ends with `StopReason.REFLECTION_BUDGET`."""

    call_attempts: int = 3
    """Tries of one (candidate, example) whose call raises `CallFailed` before the
    proposal that needs it is rejected (`RejectReason.FAILED_CALLS`); the seed's valset
    pass failing that often ends the run with the error."""

    max_failed_calls: int | None = None
    """Failed tries (metric and reflection calls that raised `CallFailed`) after which
    the run stops with `StopReason.FAILED_CALLS` (None: no limit)."""

    max_idle_iterations: int = 100
    """Stop after this many proposals in a row that cost no metric call (perfect parents
    already cached, empty or duplicate proposals): with the cache, nothing else would end
    a run where no proposal can make progress."""

    def __post_init__(self) -> None:
        positive = {
            "max_metric_calls": self.max_metric_calls,
            "reflection_minibatch_size": self.reflection_minibatch_size,
            "max_concurrency": self.max_concurrency,
            "max_idle_iterations": self.max_idle_iterations,
            "merge_subsample_size": self.merge_subsample_size,
            "call_attempts": self.call_attempts,
        }
        if self.max_reflection_calls is not None:
            positive["max_reflection_calls"] = self.max_reflection_calls
        if self.max_failed_calls is not None:
            positive["max_failed_calls"] = self.max_failed_calls
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GEPAConfig.{name} must be a positive integer, got {value!r}")
        if self.candidate_selection not in get_args(CandidateSelection):
            raise ValueError(
                f"GEPAConfig.candidate_selection must be one of {get_args(CandidateSelection)}, "
                f"got {self.candidate_selection!r}"
            )
        for name, kind in (
            ("in_flight", InFlight),
            ("siblings", Siblings),
            ("parent_pruning", Pruning),
            ("reuse_winning_minibatch", Reuse),
        ):
            if getattr(self, name) not in get_args(kind):
                raise ValueError(
                    f"GEPAConfig.{name} must be one of {get_args(kind)}, "
                    f"got {getattr(self, name)!r}"
                )
        if self.frontier not in get_args(Frontier):
            raise ValueError(
                f"GEPAConfig.frontier must be one of {get_args(Frontier)}, got {self.frontier!r}"
            )
        if self.module_selection not in get_args(ModuleSelection):
            raise ValueError(
                f"GEPAConfig.module_selection must be one of {get_args(ModuleSelection)}, "
                f"got {self.module_selection!r}"
            )
        if not isinstance(self.max_merge_invocations, int) or self.max_merge_invocations < 0:
            raise ValueError(
                "GEPAConfig.max_merge_invocations must be an integer >= 0, "
                f"got {self.max_merge_invocations!r}"
            )
        if self.proposal_shape != "auto":
            ProposalShape.parse(self.proposal_shape)  # raises with the accepted form
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"GEPAConfig.epsilon must be in [0, 1], got {self.epsilon!r}")
        if self.reflection_template not in get_args(ReflectionTemplate):
            raise ValueError(
                f"GEPAConfig.reflection_template must be one of {get_args(ReflectionTemplate)}, "
                f"got {self.reflection_template!r}"
            )
        if self.reflection_prompt_template is not None:
            check_template(self.reflection_prompt_template, "GEPAConfig.reflection_prompt_template")
        for component, template in self.component_prompt_templates.items():
            check_template(template, f"GEPAConfig.component_prompt_templates[{component!r}]")

    def template_for(self, component: str) -> str:
        """The meta-prompt `component` is reflected with: its own override, else the
        run's own template, else the built-in one `reflection_template` names."""
        default = self.reflection_prompt_template or REFLECTION_TEMPLATES[self.reflection_template]
        return self.component_prompt_templates.get(component, default)
