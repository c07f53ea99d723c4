"""The one row factory: an experiment whose measured TPS is the one asked for."""

from __future__ import annotations

from scm_xl.results import ResultRow


def make_row(exp_id: str, model: str, concurrency: int, max_tokens: int, tps: float, *,
             requests_per_slot: int = 10, time_digits: int | None = None, **extra: object) -> ResultRow:
    """`concurrency` streams x `requests_per_slot` requests of `max_tokens` tokens each, in the time
    that gives `tps`; `time_digits` rounds that time (as a results CSV keeps it), None keeps it exact.
    `extra`: any other ResultRow field (repeat, prompt_level, latencies, ...)."""
    total_requests = concurrency * requests_per_slot
    tokens = total_requests * max_tokens
    total_time_s = tokens / tps if time_digits is None else round(tokens / tps, time_digits)
    return ResultRow(exp_id=exp_id, model=model, concurrency=concurrency, requests_per_slot=requests_per_slot,
                     total_requests=total_requests, max_tokens=max_tokens, total_time_s=total_time_s,
                     total_output_tokens=tokens, **extra)  # type: ignore[arg-type]
