"""What the "auto" settings decide as a run goes, and the measurements they rest on.

`proposal_shape`, `siblings` and `reuse_winning_minibatch` may be "auto": each is then
re-decided from what the run has seen so far (the call latencies the worker pool
measured, how many judged children beat their parent, how many admitted winners led
the pool). The counts are kept here, beside the rules that read them, so each rule's
prior is seen where it is used; the scheduling only asks.
"""

from __future__ import annotations

from gepa_opt.config import GEPAConfig
from gepa_opt.in_flight import InFlightPolicy
from gepa_opt.runtime_model import CallLatency, auto_shape
from gepa_opt.shape import ProposalShape
from gepa_opt.workers import WorkerPool


class Tuning:
    def __init__(
        self, config: GEPAConfig, workers: WorkerPool, valset_size: int, reflective: int
    ) -> None:
        """`reflective`: the components a reflection LM rewrites (all but demonstrations)."""
        self._config = config
        self._workers = workers
        self._valset_size = valset_size
        self._reflective = reflective
        self.judged = self.improved = 0  # children judged on a minibatch, and beating it
        self.admitted = self.leads = 0  # winners added to the pool, and those that led it
        self._shapes: list[ProposalShape] = []
        self.policy: InFlightPolicy
        self._set_shape(self._auto_shape() if config.proposal_shape == "auto" else None)

    @property
    def shape(self) -> ProposalShape:
        """The shape in use now ("auto" re-decides it as measurements come in)."""
        return self._shapes[-1]

    def shapes_used(self) -> str:
        """Every shape the run used, in order: "2x1" or, for "auto", e.g. "1x1>1x2"."""
        return ">".join(str(shape) for shape in self._shapes)

    def retune(self) -> None:
        """Re-decide an "auto" shape before a group is drawn."""
        if self._config.proposal_shape == "auto":
            self._set_shape(self._auto_shape())

    def _set_shape(self, shape: ProposalShape | None) -> None:
        config = self._config
        shape = shape or ProposalShape.parse(config.proposal_shape)
        if not self._shapes or shape != self.shape:
            self._shapes.append(shape)
        self.policy = InFlightPolicy(config.in_flight, shape, config.max_concurrency)

    def _auto_shape(self) -> ProposalShape:
        """The runtime model's shape for the latencies, acceptance and depth measured so
        far (before anything is measured: equal latencies, an acceptance of 1/2, and every
        winner taken to lead, the case where breadth costs most)."""
        workers = self._workers
        metric_s = workers.mean_seconds("metric") or 1.0
        reflection_s = workers.mean_seconds("reflection")
        latency = CallLatency(
            max(metric_s, 1e-6), metric_s if reflection_s is None else reflection_s
        )
        # a prior of one acceptance in two, worth two judged children
        acceptance = (self.improved + 1) / (self.judged + 2)
        parents, children = auto_shape(
            self._config.max_concurrency,
            self._config.reflection_minibatch_size,
            self._valset_size,
            latency=latency,
            acceptance_rate=acceptance,
            lead_rate=self.lead_rate(),
            reflections_per_proposal=max(1, self.reflections_per_child()),
        )
        return ProposalShape(parents, children)

    def reflections_per_child(self) -> int:
        """Reflection calls one proposal makes at most: one per component it rewrites,
        none for demonstrations."""
        reflective = self._reflective
        return min(1, reflective) if self._config.module_selection == "round_robin" else reflective

    def lead_rate(self) -> float:
        """The share of winners admitted so far that led the pool, with a prior of one that
        did: depth until shown otherwise."""
        return (self.leads + 1) / (self.admitted + 1)

    def reuses_minibatch(self, reused_already: bool) -> bool:
        """Whether a winner's next group reflects on the minibatch it won on
        (`GEPAConfig.reuse_winning_minibatch`); never twice in a row."""
        mode = self._config.reuse_winning_minibatch
        return not reused_already and (
            mode == "always" or (mode == "auto" and self.lead_rate() > 0.5)
        )

    def first_improver_wins(self) -> bool:
        """Whether a group stops waiting for reflections once a child has improved
        (`GEPAConfig.siblings`). "auto" does where reflections are the slow stage (their
        measured mean at least twice a metric call's): there a group would wait for the
        slowest of N; elsewhere judging all N picks the better child."""
        mode = self._config.siblings
        if mode != "auto":
            return mode == "first"
        reflection = self._workers.mean_seconds("reflection")
        metric = self._workers.mean_seconds("metric")
        return reflection is not None and metric is not None and reflection >= 2 * metric
