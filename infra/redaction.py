"""Secrets and personal data out of trace text, before any model, log or store sees it.

Production traces carry what users pasted: API keys, tokens, passwords in URLs, emails,
phone numbers. flywheel hands trace text to a reflection model, to MLflow and to Prefect's
persisted results, so it masks it where it comes in (the trace source), the way Langfuse's
and LangSmith's masking hooks do at ingestion. Each match becomes `[REDACTED:<kind>]`, so
a reader (or a reflection model) still sees that something was there and what it was.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from infra.types import Example

# The names a credential goes by, as a key in text (`password=...`) or in a dict.
CREDENTIAL_NAMES = (
    r"(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key|access[_-]?token"
    r"|auth[_-]?token|secret[_-]?key)"
)
CREDENTIAL_KEY = re.compile(rf"(?i)(?:.*[_-])?{CREDENTIAL_NAMES}")

# (kind, pattern); a pattern's group 1, when it has one, is the part to mask (the rest
# is context kept readable, such as "Bearer " or "https://"). Order matters: the
# specific kinds run before the generic ones that would also match them.
BUILTIN_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "private_key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    ),
    # user:password up to the last @ before the host: a password may hold an @ itself
    ("url_password", r"(?<=://)([^/\s:@]+:[^/\s]+)(?=@[^/\s@]*(?:[/\s]|$))"),
    (
        "url_secret",
        r"(?i)[?&](?:api[_-]?key|key|token|access[_-]?token|secret|password|sig)=([^&\s#]+)",
    ),
    ("bearer_token", r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{12,})"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("stripe_key", r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "aws_secret_key",
        r"(?i)(?:aws_?secret_?access_?key|secret_?access_?key|aws_?secret)"
        r"[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
    ),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("api_key", r"\bsk-[A-Za-z0-9_-]{20,}"),  # OpenAI, Anthropic (sk-ant-), Langfuse (sk-lf-)
    # password=..., "secret": "...", api_key: ... in free text, whatever the value looks like
    (
        "credential",
        rf"(?i)\b{CREDENTIAL_NAMES}[\"']?\s*[:=]\s*[\"']?(?!\[REDACTED:)([^\s\"'&,;]+)",
    ),
    ("email", r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    (
        "phone",
        # +1 415 555 0100, (415) 555-0100, 415.555.0100, +14155550100; not dates, IPs or
        # bare order numbers: a separator, parentheses or a leading + is required
        r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{3,4}"
        r"(?![\w]|[.-]\d)|(?<![\w+])\+\d{8,14}\b",
    ),
)


@dataclass(frozen=True)
class Redactor:
    """Masks every match of its patterns; counts what it masked, per kind."""

    patterns: tuple[tuple[str, re.Pattern[str]], ...]
    counts: Counter[str] = field(default_factory=Counter, compare=False)

    @classmethod
    def standard(cls, extra: Iterable[str] = ()) -> Redactor:
        """The built-in kinds, then the user's own regular expressions (kind "custom")."""
        compiled = [(kind, re.compile(pattern)) for kind, pattern in BUILTIN_PATTERNS]
        for pattern in extra:
            compiled.append(("custom", compile_user_pattern(pattern)))
        return cls(tuple(compiled))

    def text(self, text: str) -> str:
        for kind, pattern in self.patterns:
            text = pattern.sub(lambda m, kind=kind: self._mask(m, kind), text)
        return text

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it masked, dict keys too (a pasted key
        can be a secret), and the whole string under a credential's name (`password`)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self._key(k): self._field(k, v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def _key(self, key: Any) -> Any:
        return self.text(key) if isinstance(key, str) else key

    def _field(self, key: Any, value: Any) -> Any:
        if isinstance(key, str) and isinstance(value, str) and CREDENTIAL_KEY.fullmatch(key):
            self.counts["credential"] += 1
            return "[REDACTED:credential]"
        return self.value(value)

    def example(self, example: Example) -> Example:
        """A task instance with its inputs, reference and metadata masked."""
        return replace(
            example,
            inputs=self.value(example.inputs),
            reference=self.value(example.reference),
            metadata=self.value(example.metadata),
        )

    def _mask(self, match: re.Match[str], kind: str) -> str:
        self.counts[kind] += 1
        label = f"[REDACTED:{kind}]"
        if match.re.groups and match.group(1) is not None:
            whole, start, end = match.group(0), *match.span(1)
            offset = match.start(0)
            return whole[: start - offset] + label + whole[end - offset :]
        return label


def mask(text: str) -> str:
    """`text` with the built-in kinds masked: for settings values (URLs with a password
    or a key in the query) before they are logged, shown or stored."""
    return Redactor.standard().text(text)


def compile_user_pattern(pattern: str) -> re.Pattern[str]:
    """A user's regular expression, or a ValueError that quotes it."""
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(
            f"redaction pattern {pattern!r} is not a regular expression: {error}"
        ) from None
