"""The judge model's features under plain transformers, for the reward head's benchmark.

What `LM.features` returns (the final hidden state, after the model's final norm, at the
last token of the chat prompt with the generation prompt added), read here without the
engine, so that the head can be measured on any local checkpoint before the engine reads
it. One forward pass per prompt gives three readings, all kept:

- `last`: the feature `LM.features` returns, what the night's head reads;
- `reply_mean`: the same hidden state averaged over the judged reply's tokens (another
  feature position, measured as an alternative);
- `p_yes`: P("Yes") / (P("Yes") + P("No")) from the same position's next-token logits,
  the judge's own verdict (what `PointwiseJudge.p_pass` reads; both answers are one token);
- `layers`: the residual stream at the prompt's last token after the embeddings and after
  each layer (before the final norm; the last row is what `last` normalizes), to measure
  a head on an earlier layer.

Prompts share their system turn (the rubric and the data note), so it is run once and
its key/value cache reused for each prompt's remainder (numerically equal to a whole
pass to float rounding, at half the cost). Readings are cached on disk by the prompt's
text and the checkpoint, so a killed run resumes and a second one reads nothing twice.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from judges.judged_text import as_data

Messages = list[dict[str, str]]
USER_TURN = "<|im_start|>user"  # where a ChatML prompt's shared system turn ends


@dataclass(frozen=True)
class Reading:
    last: np.ndarray  # float32, the final norm's output at the prompt's last token
    reply_mean: np.ndarray  # the same, averaged over the reply's tokens
    p_yes: float
    layers: np.ndarray | None = None  # [layers + 1, hidden] float16; None in older caches


class TeacherReader:
    """A causal LM checkpoint read as the judge reads it, one prompt at a time."""

    def __init__(self, checkpoint: str | Path, cache: Path | None = None, threads: int = 2):
        self.checkpoint, self.threads = str(checkpoint), threads
        self.tokenizer = AutoTokenizer.from_pretrained(self.checkpoint)
        self._model = None  # loaded on the first prompt the cache does not hold
        self.yes, self.no = (self.tokenizer.encode(w)[0] for w in ("Yes", "No"))
        self.cache_path = cache
        self.readings: dict[str, Reading] = {}
        if cache is not None and cache.is_file():
            self.readings = pickle.loads(cache.read_bytes())
        self._prefixes: dict[tuple[int, ...], object] = {}
        self.read_now = 0  # prompts run in this process (not from the cache)
        self.seconds = 0.0

    @property
    def model(self):
        if self._model is None:
            torch.set_num_threads(self.threads)
            self._model = AutoModelForCausalLM.from_pretrained(
                self.checkpoint, dtype=torch.float32
            ).eval()
        return self._model

    def key(self, messages: Messages) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        return hashlib.sha256(f"{self.checkpoint}\n{text}".encode()).hexdigest()

    def _has(self, key: str) -> bool:
        """Read already, with every layer (a reading cached before `layers` is read again)."""
        return key in self.readings and self.readings[key].layers is not None

    def save(self) -> None:
        if self.cache_path is not None:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            scratch = self.cache_path.with_suffix(".tmp")
            scratch.write_bytes(pickle.dumps(self.readings))
            scratch.replace(self.cache_path)

    def read(self, messages: Messages, reply: str) -> Reading:
        """The three readings of one judge prompt whose judged reply is `reply`."""
        return self.read_many([(messages, reply)])[0]

    @torch.no_grad()
    def read_many(self, prompts: list[tuple[Messages, str]], batch: int = 8) -> list[Reading]:
        """`read` for each (messages, reply), `batch` prompts per forward pass over their
        shared system turn. Right padding needs no mask: a causal model's real tokens never
        attend to the padding after them."""
        todo = [(self.key(m), m, r) for m, r in prompts]
        fresh = list({k: (k, m, r) for k, m, r in todo if not self._has(k)}.values())
        for start in range(0, len(fresh), batch):
            started = time.perf_counter()
            group = fresh[start : start + batch]
            encoded = [self._encode(m, r) for _, m, r in group]
            for prefix in dict.fromkeys(e[0] for e in encoded):  # one pass per shared turn
                rows = [(k, e) for (k, _, _), e in zip(group, encoded, strict=True)]
                rows = [(k, e) for k, e in rows if e[0] == prefix]
                readings = self._forward(prefix, [e for _, e in rows])
                for (key, _), reading in zip(rows, readings, strict=True):
                    self.readings[key] = reading
            self.read_now += len(group)
            self.seconds += time.perf_counter() - started
            self.save()
        return [self.readings[k] for k, _, _ in todo]

    def _encode(
        self, messages: Messages, reply: str
    ) -> tuple[tuple[int, ...], list[int], list[int]]:
        """(the shared system turn's tokens, the rest, the rest's positions of the reply)."""
        text = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        enc = self.tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        cut = sum(1 for _, end in offsets if end <= text.index(USER_TURN))
        tagged = as_data("reply", reply)
        start = text.rindex(tagged) + len("<reply>\n")
        end = start + len(tagged) - len("<reply>\n") - len("\n</reply>")
        inside = [n - cut for n, (a, b) in enumerate(offsets) if n >= cut and a < end and b > start]
        return tuple(ids[:cut]), ids[cut:], inside

    def _forward(self, prefix: tuple[int, ...], rows: list) -> list[Reading]:
        if prefix not in self._prefixes:
            out = self.model.model(input_ids=torch.tensor([prefix]), use_cache=True)
            self._prefixes[prefix] = out.past_key_values
        cache = copy.deepcopy(self._prefixes[prefix])
        cache.batch_repeat_interleave(len(rows))
        width = max(len(rest) for _, rest, _ in rows)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.tensor([rest + [pad] * (width - len(rest)) for _, rest, _ in rows])
        passed = self.model.model(
            input_ids=ids, past_key_values=cache, use_cache=True, output_hidden_states=True
        )
        states = passed.last_hidden_state  # after the final norm
        out = []
        for n, (_, rest, inside) in enumerate(rows):
            last = states[n, len(rest) - 1]
            logits = self.model.lm_head(last)
            yes, no = logits[self.yes].item(), logits[self.no].item()
            mean = states[n, inside].mean(0) if inside else last
            out.append(
                Reading(
                    last=last.float().numpy().copy(),
                    reply_mean=mean.float().numpy().copy(),
                    p_yes=float(1 / (1 + np.exp(no - yes))),
                    layers=torch.stack([h[n, len(rest) - 1] for h in passed.hidden_states])
                    .to(torch.float16)
                    .numpy(),
                )
            )
        return out

    async def features(self, messages: Messages, adapter: str | None = None) -> list[float]:
        """`LM.features` (the base model only): the head's input for `messages`."""
        if adapter is not None:
            raise NotImplementedError("the benchmark reads the base judge model only")
        reply = _reply_of(messages)
        reading = await asyncio.to_thread(self.read, messages, reply)
        return reading.last.astype(float).tolist()


def _reply_of(messages: Messages) -> str:
    """The judged reply inside a judge prompt's user turn (between its reply tags)."""
    user = messages[-1]["content"]
    start = user.index("<reply>\n") + len("<reply>\n")
    return user[start : user.index("\n</reply>", start)]
