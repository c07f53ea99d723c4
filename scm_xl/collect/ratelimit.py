"""A provider's rate-limit headers, read from the wire (no I/O).

OpenAI-compatible providers send, on every response and on a 429, some subset of

    x-ratelimit-limit-requests / -tokens        the limits per minute
    x-ratelimit-remaining-requests / -tokens    what is left of them now
    x-ratelimit-reset-requests / -tokens        until they are whole again ("6m0s", "1.5s", "20ms")
    retry-after                                 seconds (or an HTTP date) to wait after a 429

`read_headers` takes what one response carried; `RateLimitSeen` folds an experiment's responses
into the figures the results CSV records (the limits as last sent, the least remaining, the
longest reset and Retry-After), which `solve` turns into constraints (scm_xl.capacity). A header
that does not parse is left out, never guessed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

# results.csv column -> (header, kind); the one home of the spelling on both sides
COLUMNS: dict[str, tuple[str, str]] = {
    "ratelimit_limit_requests": ("x-ratelimit-limit-requests", "count"),
    "ratelimit_limit_tokens": ("x-ratelimit-limit-tokens", "count"),
    "ratelimit_remaining_requests": ("x-ratelimit-remaining-requests", "count"),
    "ratelimit_remaining_tokens": ("x-ratelimit-remaining-tokens", "count"),
    "ratelimit_reset_s": ("x-ratelimit-reset-requests", "duration"),  # and -tokens: the longer
    "retry_after_s": ("retry-after", "seconds"),
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float | None:
    """OpenAI's reset spelling ("1h2m3.5s", "6m0s", "20ms", "1.5s") or plain seconds, in seconds;
    None when it is neither."""
    text = text.strip().lower()
    try:
        value = float(text)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    if not text or _DURATION_PART.sub("", text):
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in _DURATION_PART.findall(text))


def _count(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() and len(text) <= 15 else None


def read_headers(headers: Mapping[str, str]) -> dict[str, float]:
    """The rate-limit figures one response carried, by results column (absent: not sent)."""
    out: dict[str, float] = {}
    get = {name.lower(): value for name, value in headers.items()}.get
    for column, (header, kind) in COLUMNS.items():
        if kind == "count":
            value = get(header)
            number = _count(value) if value is not None else None
            if number is not None:
                out[column] = number
    resets = [parse_duration(value) for value in (get("x-ratelimit-reset-requests"), get("x-ratelimit-reset-tokens"))
              if value is not None]
    if any(r is not None for r in resets):
        out["ratelimit_reset_s"] = max(r for r in resets if r is not None)
    retry = get("retry-after")
    if retry is not None:
        seconds = parse_duration(retry)
        if seconds is not None:
            out["retry_after_s"] = seconds
    return out


@dataclass
class RateLimitSeen:
    """An experiment's rate-limit figures: limits as last sent, the least remaining, the longest
    reset and Retry-After."""

    figures: dict[str, float] = field(default_factory=dict)

    def add(self, seen: Mapping[str, float]) -> None:
        for column, value in seen.items():
            old = self.figures.get(column)
            if column.startswith("ratelimit_limit_") or old is None:
                self.figures[column] = value
            elif column.startswith("ratelimit_remaining_"):
                self.figures[column] = min(old, value)
            else:
                self.figures[column] = max(old, value)

    def columns(self) -> dict[str, Any]:
        """Every column, None where the provider never sent it."""
        return {column: (int(self.figures[column]) if kind == "count" else float(self.figures[column]))
                if column in self.figures else None for column, (_, kind) in COLUMNS.items()}
