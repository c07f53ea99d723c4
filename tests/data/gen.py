"""Seeded generators of results CSVs with a known truth, for the model and workbook tests.

The truth is the SCM model itself, TPS = BASE_TPS x f(c) x K(L) / C(m), with
multiplicative log-normal noise. Each request is taken to output exactly
max_tokens tokens, so total_output_tokens = total_requests x max_tokens and
total_time_s is what makes TPS come out as drawn.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable
from pathlib import Path

from scm_xl.results import ResultRow, write_results
from support.rows import make_row

BASE_TPS = 40.0
TRUE_F = {1: 1.0, 2: 1.85, 4: 3.1, 8: 4.6}
TRUE_K = {50: 1.0, 100: 0.55, 200: 0.3}
TRUE_C = {"model-a": 1.0, "model-b": 1.6}
MODELS = tuple(TRUE_C)
REQUESTS_PER_SLOT = 8


def true_tps(concurrency: int, max_tokens: int, model: str) -> float:
    return BASE_TPS * TRUE_F[concurrency] * TRUE_K[max_tokens] / TRUE_C[model]


def experiment(exp_id: str, model: str, concurrency: int, max_tokens: int, tps: float,
               **extra: object) -> ResultRow:
    """One row whose measured TPS is `tps` (to the 6 decimals total_time_s keeps)."""
    return make_row(exp_id, model, concurrency, max_tokens, tps, requests_per_slot=REQUESTS_PER_SLOT,
                    time_digits=6, **extra)


def _noisy(rng: random.Random, sigma: float, concurrency: int, max_tokens: int, model: str) -> float:
    return true_tps(concurrency, max_tokens, model) * math.exp(rng.gauss(0.0, sigma))


def full_factorial(seed: int = 1, sigma: float = 0.03, models: Iterable[str] = MODELS,
                   replicates: bool = True) -> list[ResultRow]:
    """Every model x concurrency x max_tokens once, plus (if asked) replicates of two base-length points."""
    rng = random.Random(seed)
    rows = []
    for model in models:
        for concurrency in TRUE_F:
            for max_tokens in TRUE_K:
                tps = _noisy(rng, sigma, concurrency, max_tokens, model)
                rows.append(experiment(f"F{len(rows) + 1:02d}", model, concurrency, max_tokens, tps, repeat=1))
    # Replicates: the coefficients they identify are geometric means.
    for concurrency in (1, 2) if replicates else ():
        tps = _noisy(rng, sigma, concurrency, 50, MODELS[0])
        rows.append(experiment(f"F{len(rows) + 1:02d}", MODELS[0], concurrency, 50, tps, repeat=2))
    return rows


def sparse_design(seed: int = 2, sigma: float = 0.03) -> list[ResultRow]:
    """One factor at a time around the base point, plus a few off-axis points (the check rows)."""
    rng = random.Random(seed)
    a, b = MODELS
    points = (
        [(a, c, 50) for c in TRUE_F]  # f(c)
        + [(a, 1, 100), (a, 1, 200)]  # K_len(L), anchored at concurrency 1
        + [(b, 1, 50)]  # C_model(b)
        + [(a, 4, 200), (a, 8, 100), (b, 2, 100), (b, 8, 200)]  # off-axis
    )
    return [experiment(f"S{i:02d}", model, c, length, _noisy(rng, sigma, c, length, model))
            for i, (model, c, length) in enumerate(points, start=1)]


# The rows of `with_exclusions` that the physical filter or an override acts on.
FAILED, RATE_LIMITED, MONOTONIC, MANUAL_EXCLUDE, MANUAL_INCLUDE = "X-fail", "X-429", "X-mono", "X-out", "X-in"


def with_exclusions(seed: int = 3, sigma: float = 0.02) -> list[ResultRow]:
    """A one-model factorial in which some rows are excluded, for each reason, and one is forced in."""
    rng = random.Random(seed)
    model = MODELS[0]
    rows = []
    for concurrency in TRUE_F:
        for max_tokens in TRUE_K:
            tps = _noisy(rng, sigma, concurrency, max_tokens, model)
            rows.append(experiment(f"X{len(rows) + 1:02d}", model, concurrency, max_tokens, tps))
    by_point = {(r.concurrency, r.max_tokens): i for i, r in enumerate(rows)}

    def replace(point: tuple[int, int], exp_id: str, **changes: object) -> None:
        i = by_point[point]
        rows[i] = dataclasses.replace(rows[i], exp_id=exp_id, **changes)  # type: ignore[arg-type]

    total = {c: c * REQUESTS_PER_SLOT for c in TRUE_F}
    replace((2, 100), FAILED, ok_requests=total[2] - 2, failed_requests=2)
    replace((4, 100), RATE_LIMITED, ok_requests=total[4] - 3, rate_limited_requests=3)
    replace((2, 200), MANUAL_EXCLUDE, override="exclude")
    replace((8, 200), MANUAL_INCLUDE, ok_requests=total[8] - 1, failed_requests=1, override="include")
    # Slower at concurrency 8 than at 1, 2 and 4 with the same model and length.
    slow = experiment(MONOTONIC, model, 8, 100, true_tps(1, 100, model) * 0.9)
    rows[by_point[(8, 100)]] = slow
    return rows


def replicated_factorial(seed: int, repeats: int, sigma: float, prefix: str) -> list[ResultRow]:
    """2 models x concurrency 1,2,4,8 x max_tokens 50,100,200, each `repeats` times,
    interleaved by repeat, with log-normal noise of `sigma`."""
    rng = random.Random(seed)
    rows = []
    for r in range(repeats):
        for model in MODELS:
            for c in (1, 2, 4, 8):
                for length in (50, 100, 200):
                    tps = true_tps(c, length, model) * math.exp(rng.gauss(0.0, sigma))
                    rows.append(experiment(f"{prefix}{len(rows) + 1:03d}", model, c, length, tps, repeat=r + 1))
    return rows


def write_csv(path: str | Path, rows: Iterable[ResultRow]) -> Path:
    write_results(path, rows)
    return Path(path)
