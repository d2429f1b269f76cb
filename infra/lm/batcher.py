"""Continuous batching for a transformers causal LM on CPU.

Async callers submit requests; one worker thread (torch releases the GIL) prefills newly
arrived requests as a group and runs a lean decode loop over every active row. Rows join
at the next step and leave as soon as they finish, so a short answer never waits for a
long one and finished rows stop costing compute.

The KV cache is our own `KVSlab` (preallocated, written in place), and requests that
share a prompt prefix prefill it once (`prefix`).

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

from infra.lm.fused_decode import FusedDecoder
from infra.lm.kv_slab import KVSlab
from infra.lm.prefix import (
    Layers,
    PrefixCache,
    common_prefix_len,
    forward_suffixes,
    group_by_prefix,
)

ANY_ADAPTER = object()  # a call that may run whatever adapter is active


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
        pad_token_id: int,
        decode: Callable[[list[int]], str],
        activate_adapter: Callable[[str | None], None],
        max_batch_size: int = 32,
        batch_wait_ms: float = 5.0,
        prefill_chunk_tokens: int = 2048,
        min_shared_prefix: int = 16,
    ):
        self.model, self.pad_token_id, self.decode = model, pad_token_id, decode
        self.activate_adapter = activate_adapter
        self.max_batch_size, self.batch_wait_s = max_batch_size, batch_wait_ms / 1000
        self.prefill_chunk_tokens = prefill_chunk_tokens
        cfg = model.config
        self.max_positions = getattr(cfg, "max_position_embeddings", 1 << 30)
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self.slab = KVSlab(cfg.num_hidden_layers, kv_heads, head_dim, model.dtype, max_batch_size)
        self.prefixes = PrefixCache(min_shared=min_shared_prefix)  # huge: no sharing
        self.fused: FusedDecoder | None = None  # built on the worker; None: model.forward
        self.rows: list[_Row] = []
        self.adapter: str | None = None
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._pending: list[_Job] = []
        self._closed = False
        self._threads = torch.get_num_threads()
        self._thread = threading.Thread(target=self._run, name="lm-batcher", daemon=True)
        self._thread.start()

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

    def _run(self) -> None:
        torch.set_num_threads(self._threads)  # a new thread would start from all cores
        with torch.inference_mode():
            self.fused = FusedDecoder.for_model(self.model)  # on this thread: see the docstring
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
        for job in self._pending + [row.job for row in self.rows]:
            _resolve(job, error=RuntimeError("the batcher was closed"))

    def _collect(self) -> bool:
        """Move arrived jobs to pending; when idle, block and gather for batch_wait_ms."""
        if not self.rows and not self._pending:
            job = self._inbox.get()
            if job is None:
                return False
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
        try:
            self.activate_adapter(adapter)
        except Exception as error:  # e.g. an unknown adapter: fail only its jobs
            for job in [j for j in self._pending if j.adapter == adapter]:
                self._pending.remove(job)
                _resolve(job, error=error)
            self.activate_adapter(self.adapter)
            return False
        self.adapter = adapter
        return True

    def _run_call(self, job: _Job) -> None:
        try:
            result = job.fn()
            # fn may have changed adapter state (e.g. loaded one): restore ours
            self.activate_adapter(self.adapter)
            _resolve(job, result)
        except Exception as error:
            _resolve(job, error=error)

    def _prefill(self, jobs: list[_Job]) -> None:
        """Prefill jobs that share a prefix on top of its KV, in chunks of similar length."""
        prompts = [j.request.prompt_ids for j in jobs]
        for members, shared in group_by_prefix(prompts, self.prefixes.min_shared):
            try:
                prefix = self._prefix(prompts[members[0]][:shared], len(members) > 1)
            except Exception as error:
                for i in members:
                    _resolve(jobs[i], error=error)
                continue
            shared = prefix[0][0].shape[2] if prefix else 0
            members.sort(key=lambda i: len(prompts[i]))
            chunk: list[_Job] = []
            for i in members:
                longest = len(prompts[i]) - shared
                if chunk and (
                    longest * (len(chunk) + 1) > self.prefill_chunk_tokens
                    or longest > 1.25 * (len(chunk[0].request.prompt_ids) - shared)
                ):
                    self._prefill_chunk(chunk, prefix)
                    chunk = []
                chunk.append(jobs[i])
            if chunk:
                self._prefill_chunk(chunk, prefix)

    def _prefix(self, ids: list[int], group: bool) -> Layers | None:
        """A group's shared prefix is computed (and cached); a lone prompt reuses a cached one."""
        if group and len(ids) >= self.prefixes.min_shared:
            return self.prefixes.kv(self.model, ids, self.adapter)
        return self.prefixes.match(ids, self.adapter)[1]

    def shared_prefix(self, prompts: list[list[int]], keep: list[int]) -> Layers | None:
        """The KV of the prefix all `prompts` share, leaving row i its last `keep[i]` tokens.

        For work run on the worker thread (`call`) outside the decode loop, e.g. scoring.
        """
        shared = min(len(p) - k for p, k in zip(prompts, keep, strict=True))
        for p in prompts[1:]:
            shared = common_prefix_len(prompts[0][:shared], p)
        return self._prefix(prompts[0][:shared], len(prompts) > 1)

    def _prefill_chunk(self, jobs: list[_Job], prefix: Layers | None) -> None:
        try:
            shared = prefix[0][0].shape[2] if prefix else 0
            suffixes = [j.request.prompt_ids[shared:] for j in jobs]
            if self.fused is not None and self.adapter is None:
                logits, layers, valid = self.fused.prefill(suffixes, prefix, self.pad_token_id)
            else:  # the model's own forward runs the active adapter's LoRA layers
                out, layers, valid = forward_suffixes(
                    self.model, suffixes, prefix, self.pad_token_id, logits_to_keep=1
                )
                logits = out.logits[:, -1]
            self.slab.append(layers, valid)
        except Exception as error:
            for job in jobs:
                _resolve(job, error=error)
            return
        first = len(self.rows)
        for job in jobs:
            req = job.request
            gen = None
            if req.temperature > 0:
                gen = torch.Generator()
                gen.manual_seed(req.seed) if req.seed is not None else gen.seed()
            self.rows.append(_Row(job, gen))
        self._accept(logits, range(first, len(self.rows)))

    def _decode_step(self) -> None:
        slab = self.slab
        mask, positions = slab.step_inputs()
        ids = torch.tensor([[row.tokens[-1]] for row in self.rows])
        if self.fused is not None and self.adapter is None:
            logits = self.fused.step(ids, positions, mask, slab)
        else:  # the model's own forward runs the active adapter's LoRA layers
            logits = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                cache=slab,
                use_cache=True,
                logits_to_keep=1,
            ).logits[:, -1]
        slab.advance()
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
