"""Small, dependency-free statistics for measured latencies.

Percentiles use linear interpolation between closest ranks, the same rule as
numpy's default (`method="linear"`): for sorted values v[0..n-1] the q-th
percentile sits at position (n - 1) * q / 100.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) of `values`, linearly interpolated."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be between 0 and 100, got {q}")
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    return _interpolate(ordered, q)


def percentiles(values: Iterable[float], qs: Sequence[float] = (50, 95, 99)) -> tuple[float, ...] | None:
    """Several percentiles of `values` (sorted once); None when there are no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return tuple(_interpolate(ordered, q) for q in qs)


def mean(values: Iterable[float]) -> float | None:
    """The arithmetic mean, or None when there are no values."""
    total = 0.0
    count = 0
    for value in values:
        total += value
        count += 1
    return total / count if count else None


def _interpolate(ordered: Sequence[float], q: float) -> float:
    position = (len(ordered) - 1) * q / 100.0
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    fraction = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * fraction
