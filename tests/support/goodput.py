"""The goodput tests' hand-counted requests: a per-request CSV row, the eight measured requests of
E001 (and one warm-up) with their verdicts against Slo(ttft 0.5, tpot 0.05, e2el 2) counted by
hand, the results row they belong to, and the requests CSV they are written to."""

from __future__ import annotations

import csv
from pathlib import Path

from scm_xl.collect.records import REQUEST_COLUMNS
from scm_xl.results import ResultRow


def request_row(exp_id: str, status: str, ttft: str, latency: str, tokens: int, *, error_class: str = "",
                warmup: bool = False, prompt: str = "100") -> dict[str, str]:
    row = dict.fromkeys(REQUEST_COLUMNS, "")
    row.update(exp_id=exp_id, model="m", concurrency="2", max_tokens="10", repeat="1", slot="0", seq="0",
               warmup="true" if warmup else "false", ttft_s=ttft, latency_s=latency,
               prompt_tokens=prompt, completion_tokens=str(tokens), status=status, error_class=error_class)
    return row


# E001 against SLO (ttft 0.5, tpot 0.05, e2el 2), counted by hand:
HAND = [
    request_row("E001", "ok", "0.2", "0.6", 10),            # tpot 0.4/9 = 0.044: good
    request_row("E001", "ok", "0.6", "1.0", 10),            # ttft 0.6 > 0.5: miss ttft
    request_row("E001", "ok", "0.3", "1.5", 10),            # tpot 1.2/9 = 0.133: miss tpot
    request_row("E001", "ok", "0.4", "2.5", 10),            # tpot 0.233 and e2el 2.5: miss tpot, e2el
    request_row("E001", "ok", "0.1", "1.9", 1),             # one token: tpot undefined, holds: good
    request_row("E001", "failed", "", "0.05", 0, error_class="http_5xx"),       # failed: miss
    request_row("E001", "rate_limited", "0.45", "0.85", 10),  # 429 retried then ok, tpot 0.044: good
    request_row("E001", "rate_limited", "", "0.5", 0, error_class="rate_limited"),  # gave up: miss
    request_row("E001", "ok", "5.0", "9.0", 10, warmup=True),  # warm-up: not counted
]
# 8 measured, 3 good (rows 1, 5, 7) with 10 + 1 + 10 = 21 tokens; 51 tokens in all; 3.0 s wall.


def result_row(exp_id: str = "E001", *, total_requests: int = 8, tokens: int = 51, wall: float = 3.0,
               concurrency: int = 2, max_tokens: int = 10, model: str = "m") -> ResultRow:
    return ResultRow(exp_id=exp_id, model=model, concurrency=concurrency, requests_per_slot=4,
                     total_requests=total_requests, max_tokens=max_tokens, total_time_s=wall,
                     total_output_tokens=tokens)


def write_requests(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REQUEST_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path
