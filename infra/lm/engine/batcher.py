"""Continuous batching for a Llama-family causal LM on CPU.

Async callers submit requests; one worker thread (torch releases the GIL) prefills newly
arrived requests together and runs a lean decode loop over every active row. Rows join
at the next step and leave as soon as they finish, so a short answer never waits for a
long one and finished rows stop costing compute.

A request's tokens and log-probabilities are the same bits alone and in any batch: its
prompt is prefilled unpadded and attended on its own, a shared prefix is reused only in
whole chunks (`prefix`), and the products and the decode attention run the kernels that
`invariance` checked on this CPU when the worker started. The KV cache is our own
`KVSlab` (preallocated, written in place).

Keep a process's torch work on this thread (`call`), or in a thread that then ends
(`infra.lm.threads.run_in_own_thread`). Every long-lived thread that runs a parallel torch
op keeps its own OpenMP pool; once libgomp manages more threads than there are cores it
stops spin-waiting between ops, and every decode step here got 35% slower for the rest
of the process (measured: 490 -> 310 tokens/s after one `generate` on the main thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel

from infra.lm.engine.attention import CHUNK
from infra.lm.engine.checkpoint_weights import CheckpointWeights
from infra.lm.engine.fused_decode import Deltas, FusedDecoder, Prompt, Weights
from infra.lm.engine.invariance import EnginePlan, check_engine, unchecked_plan
from infra.lm.engine.kv_slab import KVSlab, Layers
from infra.lm.engine.prefix import PrefixCache, group_by_prefix
from infra.lm.engine.thread_governor import ThreadGovernor

ANY_ADAPTER = object()  # a call that may run whatever adapter is active
# The widest KV slab the start-up check tries (8192 columns: SmolLM2's whole context).
# Wider slabs exist only past it, where the check's memory would grow with the context.
CHECKED_CONTEXT = 8192


@dataclass(frozen=True)
class Request:
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float = 0.0
    seed: int | None = None
    stop_token_ids: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()
    adapter: str | None = None
    want_logprobs: bool = False
    top_logprobs: int = 0  # alternatives kept per generated token (0 = none)


@dataclass
class Generation:
    token_ids: list[int]  # every generated token, the stopping one included
    finish_reason: str  # "stop" | "length"
    prompt_tokens: int
    logprobs: list[float] | None = None
    top_logprobs: list[list[tuple[int, float]]] | None = None


@dataclass
class _Job:
    """A request, or a function to run on the worker thread, plus its future."""

    adapter: Any
    future: asyncio.Future | concurrent.futures.Future
    loop: asyncio.AbstractEventLoop | None  # None: a blocking caller's thread-safe future
    request: Request | None = None
    fn: Callable[[], Any] | None = None


@dataclass
class _Row:
    job: _Job
    generator: torch.Generator | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[list[tuple[int, float]]] = field(default_factory=list)


def _resolve(job: _Job, result: Any = None, error: BaseException | None = None) -> None:
    def settle() -> None:
        if job.future.done():  # the caller cancelled
            return
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)

    if job.loop is None:
        settle()
    else:
        job.loop.call_soon_threadsafe(settle)


class Batcher:
    """The decode engine: `await generate(request)` from any event loop."""

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        decode: Callable[[list[int]], str],
        max_batch_size: int = 32,
        batch_wait_ms: float = 5.0,
        prefill_tokens: int = 2048,
        min_shared_prefix: int = CHUNK,
        batch_invariant: bool = True,
        adapt_threads: bool = True,
        checkpoint: CheckpointWeights | None = None,
    ):
        """With `checkpoint`, the model's Linear weights are released once packed
        (`fused_decode`): the engine then holds the only copy of them."""
        self.model, self.decode, self.checkpoint = model, decode, checkpoint
        self.max_batch_size, self.batch_wait_s = max_batch_size, batch_wait_ms / 1000
        self.prefill_tokens = prefill_tokens
        self.batch_invariant, self.adapt_threads = batch_invariant, adapt_threads
        self.max_positions = getattr(model.config, "max_position_embeddings", 1 << 30)
        self.prefixes = PrefixCache()
        self.min_shared = max(min_shared_prefix, CHUNK)
        # built on the worker thread (see the module docstring): the fused forward, the
        # KV slab, each served adapter's deltas, and the weights each one runs on (packed
        # on first use after the engine rested)
        self.fused: FusedDecoder
        self.slab: KVSlab
        self.adapter_deltas: dict[str, Callable[[], Deltas]] = {}
        self.weight_sets: dict[str | None, Weights] = {}
        self.plan: EnginePlan = unchecked_plan()
        self.governor: ThreadGovernor | None = None
        self.rows: list[_Row] = []
        self.adapter: str | None = None
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._pending: list[_Job] = []
        self._closed = False
        self._threads = torch.get_num_threads()
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lm-batcher", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise self._start_error

    # ---- caller side (event loop) ----

    async def generate(self, request: Request) -> Generation:
        if not request.prompt_ids:
            raise ValueError("Request.prompt_ids is empty")
        if len(request.prompt_ids) >= self.max_positions:
            raise ValueError(
                f"prompt of {len(request.prompt_ids)} tokens exceeds the model's "
                f"{self.max_positions}-token context"
            )
        if request.max_new_tokens < 1:
            raise ValueError("Request.max_new_tokens must be at least 1")
        return await self._submit(_Job(request.adapter, *self._future(), request=request))

    async def call(self, fn: Callable[[], Any], adapter: Any = ANY_ADAPTER) -> Any:
        """Run `fn` on the worker between steps, with `adapter` active unless ANY_ADAPTER."""
        return await self._submit(_Job(adapter, *self._future(), fn=fn))

    def call_blocking(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the worker between steps and wait for it, from any thread."""
        if self._closed:
            raise RuntimeError("the batcher is closed")
        job = _Job(ANY_ADAPTER, concurrent.futures.Future(), None, fn=fn)
        self._inbox.put(job)
        return job.future.result()

    async def add_adapter(self, name: str, deltas: Callable[[], Deltas]) -> None:
        """Serve `name` as the base weights plus `deltas()`, computed on the worker (its
        matmuls too, see the module docstring) between decode steps; returns once it is
        served, without blocking the caller's event loop. A loaded name is replaced, and
        rows already running on it finish on the new weights."""

        def add() -> None:
            weights = self.fused.weights(deltas())
            weights.use(self.plan.plan_for)
            self.adapter_deltas[name] = deltas  # to pack it again after a rest
            self.weight_sets[name] = weights
            self.prefixes.clear()  # a reloaded adapter's cached KV is stale

        await self.call(add)

    async def remove_adapter(self, name: str) -> None:
        """Stop serving `name`, on the worker between decode steps; its weights are freed
        once no row runs on them."""

        def remove() -> None:
            self.adapter_deltas.pop(name, None)
            self.weight_sets.pop(name, None)
            self.prefixes.clear()
            if self.adapter == name:  # nothing runs on it now; the base is always served
                self.adapter = None

        await self.call(remove)

    async def rest(self) -> bool:
        """Free the packed weights of the base and of every adapter, and the cached KV,
        while no request runs; the next request packs what it needs again (seconds: the
        checkpoint's pages are usually still in the OS's file cache). For a model left idle
        while other work needs the memory: a night's teacher while the agent's adapter
        trains. Whether it rested (not while a request is in flight)."""

        def rest() -> bool:
            if self.rows:
                return False
            self.weight_sets.clear()
            self.fused.rest()
            self.prefixes.clear()
            return True

        return await self.call(rest)

    @property
    def adapters(self) -> list[str]:
        # list() copies the keys in one step, so the worker adding one cannot interleave
        return list(self.adapter_deltas)

    def has_adapter(self, name: str | None) -> bool:
        """Whether `name` (None: the base model) is served; cheap, from any thread."""
        return name is None or name in self.adapter_deltas

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._inbox.put(None)
            self._thread.join(timeout=30)

    def _future(self) -> tuple[asyncio.Future, asyncio.AbstractEventLoop]:
        loop = asyncio.get_running_loop()
        return loop.create_future(), loop

    async def _submit(self, job: _Job) -> Any:
        if self._closed:
            raise RuntimeError("the batcher is closed")
        self._inbox.put(job)
        return await job.future

    # ---- worker side ----

    def _start(self) -> None:
        """Pack the weights and check the kernels on this thread, at its thread count."""
        torch.set_num_threads(self._threads)  # a new thread would start from all cores
        self.fused = FusedDecoder(self.model, self.checkpoint)  # raises if it cannot run it
        fused, base = self.fused, self.fused.base
        cfg = self.model.config
        self.slab = KVSlab(
            cfg.num_hidden_layers, fused.kv_heads, fused.head_dim, fused.dtype, self.max_batch_size
        )
        self.weight_sets[None] = base
        if self.batch_invariant:
            self._use(
                check_engine(
                    list(base.layers[0].linears()),
                    [base.head, base.scores],
                    fused.kv_heads,
                    fused.heads // fused.kv_heads,
                    fused.head_dim,
                    context=min(self.max_positions, CHECKED_CONTEXT),
                )
            )
        adapt = self.adapt_threads and not self.plan.threads_change_bits
        self.governor = ThreadGovernor(self._threads, enabled=adapt)

    def use_plan(self, plan: EnginePlan) -> None:
        """Run another plan from the next step on (benchmarks compare plans side by side)."""
        self.call_blocking(lambda: self._use(plan))

    def _use(self, plan: EnginePlan) -> None:
        self.plan = plan
        self.fused.use_attention(plan.attention)
        for weights in self.weight_sets.values():
            weights.use(plan.plan_for)

    def _run(self) -> None:
        with torch.inference_mode():
            try:
                self._start()
            except BaseException as error:  # the constructor raises it
                self._start_error = error
                return
            finally:
                self._started.set()
            while self._collect():
                try:
                    self._admit()
                    if self.rows:
                        self._decode_step()
                except Exception as error:  # fail the rows in flight, keep serving
                    for row in self.rows:
                        _resolve(row.job, error=error)
                    self.rows.clear()
                    self.slab.remove(list(range(self.slab.n)))
                self.governor.tick()
        for job in self._pending + [row.job for row in self.rows]:
            _resolve(job, error=RuntimeError("the batcher was closed"))

    def _collect(self) -> bool:
        """Move arrived jobs to pending; when idle, block and gather for batch_wait_ms."""
        if not self.rows and not self._pending:
            job = self._inbox.get()
            if job is None:
                return False
            self.governor.rest()
            self._pending.append(job)
            deadline = time.monotonic() + self.batch_wait_s
            while (left := deadline - time.monotonic()) > 0:
                try:
                    job = self._inbox.get(timeout=left)
                except queue.Empty:
                    break
                if job is None:
                    return False
                self._pending.append(job)
        while True:
            try:
                job = self._inbox.get_nowait()
            except queue.Empty:
                return True
            if job is None:
                return False
            self._pending.append(job)

    def _admit(self) -> None:
        """Start pending jobs of the current adapter; switch adapters once its rows drain.

        While a pending job wants another adapter, no new rows of the current one join, so
        it waits at most one drain.
        """
        self._pending = [j for j in self._pending if not j.future.cancelled()]
        if not self._pending:
            return
        if not self.rows:  # idle: serve the adapter of the oldest job
            wanted = next(
                (j.adapter for j in self._pending if j.adapter is not ANY_ADAPTER), self.adapter
            )
            if wanted != self.adapter and not self._switch(wanted):
                return
        others = any(j.adapter not in (ANY_ADAPTER, self.adapter) for j in self._pending)
        if others and self.rows:  # drain first: no new rows of the current adapter
            runnable = [j for j in self._pending if j.adapter is ANY_ADAPTER]
        else:
            runnable = [j for j in self._pending if j.adapter in (ANY_ADAPTER, self.adapter)]
        room = self.max_batch_size - len(self.rows)
        requests: list[_Job] = []
        for job in runnable:
            if job.fn is not None:
                self._pending.remove(job)
                self._run_call(job)
            elif len(requests) < room:
                self._pending.remove(job)
                requests.append(job)
        if requests:
            self._prefill(requests)

    def _switch(self, adapter: str | None) -> bool:
        if not self.has_adapter(adapter):  # fail only its jobs
            error = KeyError(f"unknown adapter {adapter!r}; loaded: {self.adapters}")
            for job in [j for j in self._pending if j.adapter == adapter]:
                self._pending.remove(job)
                _resolve(job, error=error)
            return False
        self.adapter = adapter
        return True

    def _run_call(self, job: _Job) -> None:
        try:
            _resolve(job, job.fn())
        except Exception as error:
            _resolve(job, error=error)

    def weights(self) -> Weights:
        """The current adapter's weights, packed again if the engine rested."""
        name = self.adapter
        if name not in self.weight_sets:
            base = self.fused.base  # packed again first if the engine rested
            weights = base if name is None else self.fused.weights(self.adapter_deltas[name]())
            weights.use(self.plan.plan_for)
            self.weight_sets[name] = weights
        return self.weight_sets[name]

    def prefill(
        self, prompts: list[list[int]], keep: list[int]
    ) -> tuple[list[torch.Tensor], list[Layers]]:
        """Prefill `prompts` on the current weights (worker thread): each one's final
        hidden states at its last `keep[i]` positions [keep, hidden], and its K/V.

        Prompts that share a whole-chunk prefix get its K/V from the cache, or computed
        once for them all; the rest goes through in passes of at most `prefill_tokens`.
        """
        weights = self.weights()
        work: list[Prompt | None] = [None] * len(prompts)
        shared_prefixes: list[tuple[list[int], list[int]]] = []  # (prefix ids, members)
        for members, shared in group_by_prefix(prompts, self.min_shared, keep):
            if len(members) > 1 and shared:
                shared_prefixes.append((prompts[members[0]][:shared], members))
            else:
                for i in members:
                    start, past = self.prefixes.match(prompts[i], self.adapter, keep[i])
                    work[i] = Prompt(prompts[i][start:], start, past, list(range(-keep[i], 0)))
        computed = self._prefixes([ids for ids, _ in shared_prefixes], weights)
        for (ids, members), past in zip(shared_prefixes, computed, strict=True):
            for i in members:
                work[i] = Prompt(prompts[i][len(ids) :], len(ids), past, list(range(-keep[i], 0)))
        hidden, kv = [], []
        for batch in self._passes(work):
            out, layers = self.fused.prefill(batch, weights)
            hidden += list(out.split([len(p.outputs) for p in batch]))
            kv += layers
        return hidden, kv

    def _prefixes(self, prefixes: list[list[int]], weights: Weights) -> list[Layers]:
        """The K/V of each whole-chunk prefix, extending the longest cached match."""
        work = []
        for ids in prefixes:
            start, past = self.prefixes.match(ids, self.adapter, keep=0)
            work.append(Prompt(ids[start:], start, past, outputs=[]))
        todo = [p for p in work if p.ids]
        for batch in self._passes(todo):
            for prompt, kv in zip(batch, self.fused.prefill(batch, weights)[1], strict=True):
                prompt.prefix = kv  # now the whole prefix
        for ids, prompt in zip(prefixes, work, strict=True):
            if prompt.ids:
                self.prefixes.put(ids, self.adapter, prompt.prefix)
        return [p.prefix for p in work]

    def _passes(self, work: list[Prompt]) -> list[list[Prompt]]:
        """Group prompts into prefill passes of at most `prefill_tokens` new tokens."""
        passes: list[list[Prompt]] = []
        tokens = 0
        for prompt in work:
            if not passes or tokens + len(prompt.ids) > self.prefill_tokens:
                passes.append([])
                tokens = 0
            passes[-1].append(prompt)
            tokens += len(prompt.ids)
        return passes

    def _prefill(self, jobs: list[_Job]) -> None:
        try:
            prompts = [j.request.prompt_ids for j in jobs]
            hidden, kv = self.prefill(prompts, [1] * len(jobs))
            logits = self.weights().head(torch.cat(hidden))
        except Exception as error:
            for job in jobs:
                _resolve(job, error=error)
            return
        first = len(self.rows)
        for job, layers in zip(jobs, kv, strict=True):
            self.slab.add(layers)
            req = job.request
            gen = None
            if req.temperature > 0:
                gen = torch.Generator()
                gen.manual_seed(req.seed) if req.seed is not None else gen.seed()
            self.rows.append(_Row(job, gen))
        self._accept(logits, range(first, len(self.rows)))

    def _decode_step(self) -> None:
        ids = torch.tensor([row.tokens[-1] for row in self.rows])
        logits = self.fused.step(ids, self.slab, self.weights())
        self._accept(logits, range(len(self.rows)))

    def _accept(self, logits: torch.Tensor, slots: range) -> None:
        """Choose each row's next token, record it, and retire the rows that are done."""
        rows = [self.rows[s] for s in slots]
        logits = logits.float()  # argmax on bf16 is 5x slower, and logprobs want fp32
        tokens = logits.argmax(-1)
        for i, row in enumerate(rows):
            if row.generator is not None:
                probs = torch.softmax(logits[i] / row.job.request.temperature, -1)
                tokens[i] = torch.multinomial(probs, 1, generator=row.generator)[0]
        scored = [i for i, row in enumerate(rows) if row.job.request.want_logprobs]
        if scored:
            logp = torch.log_softmax(logits[scored], -1)
        chosen = tokens.tolist()
        for i, row in enumerate(rows):
            row.tokens.append(chosen[i])
        for k, i in enumerate(scored):
            row, req = rows[i], rows[i].job.request
            row.logprobs.append(float(logp[k, chosen[i]]))
            if req.top_logprobs:
                values, ids = logp[k].topk(req.top_logprobs)
                row.top.append(list(zip(ids.tolist(), values.tolist(), strict=True)))
        done = [s for s, row in zip(slots, rows, strict=True) if self._finish(row)]
        if done:
            for src, dst in self.slab.remove(done):
                self.rows[dst] = self.rows[src]
            del self.rows[self.slab.n :]

    def _finish(self, row: _Row) -> bool:
        """Resolve the row's future if it is done (or abandoned); True when it is."""
        req = row.job.request
        reason = None
        if row.job.future.cancelled():
            return True
        if row.tokens[-1] in req.stop_token_ids:
            reason = "stop"
        elif req.stop_strings and self._hits_stop_string(row.tokens, req.stop_strings):
            reason = "stop"
        elif len(row.tokens) >= req.max_new_tokens:
            reason = "length"
        elif len(req.prompt_ids) + len(row.tokens) >= self.max_positions:
            reason = "length"
        if reason is None:
            return False
        want = req.want_logprobs
        _resolve(
            row.job,
            Generation(
                token_ids=row.tokens,
                finish_reason=reason,
                prompt_tokens=len(req.prompt_ids),
                logprobs=row.logprobs if want else None,
                top_logprobs=row.top if want and req.top_logprobs else None,
            ),
        )
        return True

    def _hits_stop_string(self, tokens: list[int], stops: tuple[str, ...]) -> bool:
        # A stop string can only end in the newest tokens: decode a tail long enough for
        # the longest one (a token is at least one character, give or take a split byte).
        tail = self.decode(tokens[-(max(map(len, stops)) + 3) :])
        return any(s in tail for s in stops)
