"""Replicates: rows of the same (model, concurrency, max_tokens, prompt level) summarised by their median (no I/O).

Per cell (model names compared case-insensitively, as spreadsheet criteria do):

    median_tps   the median of the rows' TPS; an even count averages the two middle
                 values, as the spreadsheet MEDIAN function does
    n            the number of rows
    cv           the coefficient of variation: sample standard deviation (n - 1)
                 over the mean; None for a single row
    flagged      cv > cv_threshold (default 0.10): the runs of this cell disagree
    repeats_needed / more_repeats
                 the stability note. More runs do not make the spread (cv) smaller;
                 they make the cell's *estimate* more precise. A cell is called stable
                 when the 90% confidence half-width of its mean TPS is within
                 cv_threshold of the mean:  z * cv / sqrt(n) <= cv_threshold, with
                 z = 1.645 (normal 95th percentile), so
                     repeats_needed = ceil((z * cv / cv_threshold)^2)   (at least 2)
                 and more_repeats = max(0, repeats_needed - n). A single row has no
                 measured spread: repeats_needed is None (run at least one more).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

from scm_xl.model import KeyedRow, RowStatus

DEFAULT_CV_THRESHOLD = 0.10
# One-sided 95% normal quantile: the 90% two-sided half-width multiplier.
Z_90 = statistics.NormalDist().inv_cdf(0.95)


class TpsRow(KeyedRow, Protocol):
    @property
    def tps(self) -> float: ...


@dataclass(frozen=True)
class CellSummary:
    model: str  # first spelling seen
    concurrency: int
    max_tokens: int
    exp_ids: tuple[str, ...]
    n: int
    median_tps: float
    mean_tps: float
    cv: float | None
    flagged: bool
    repeats_needed: int | None
    more_repeats: int | None
    prompt_level: int | None = None  # the rows' prompt level (a status's: blank counted as the base level)

    def note(self, threshold: float = DEFAULT_CV_THRESHOLD) -> str:
        if self.cv is None:
            return "one run: no spread measured; repeat it at least once"
        spread = f"CV {self.cv * 100:.1f}%"
        if self.flagged:
            spread += f" above {threshold * 100:.0f}%"
        if not self.more_repeats:
            return f"{spread}; stable with {self.n} runs"
        return (f"{spread}; {self.more_repeats} more run{'s' if self.more_repeats != 1 else ''} "
                f"({self.repeats_needed} in all) to know its TPS within ±{threshold * 100:.0f}%")


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof=1) over the mean; None for fewer than two values."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    if mean == 0:
        return None
    return statistics.stdev(values) / mean


def repeats_needed(cv: float | None, threshold: float = DEFAULT_CV_THRESHOLD) -> int | None:
    """Runs needed for the 90% half-width of the mean to be within `threshold` (see module doc)."""
    if cv is None:
        return None
    return max(2, math.ceil((Z_90 * cv / threshold) ** 2 - 1e-12))


def summarize(rows: Iterable[TpsRow], *, cv_threshold: float = DEFAULT_CV_THRESHOLD) -> list[CellSummary]:
    """One summary per (model, concurrency, max_tokens, prompt level), in order of first appearance.

    Pass the rows that should count (e.g. the included statuses of `model.filter_rows`).
    """
    if cv_threshold <= 0:
        raise ValueError(f"cv_threshold must be positive, got {cv_threshold}")
    cells: dict[tuple[str, int, int, int | None], list[TpsRow]] = {}
    for row in rows:
        key = (row.model.casefold(), row.concurrency, row.max_tokens, getattr(row, "prompt_level", None))
        cells.setdefault(key, []).append(row)
    summaries = []
    for members in cells.values():
        values = [r.tps for r in members]
        cv = coefficient_of_variation(values)
        needed = repeats_needed(cv, cv_threshold)
        summaries.append(CellSummary(
            model=members[0].model, concurrency=members[0].concurrency, max_tokens=members[0].max_tokens,
            exp_ids=tuple(r.exp_id for r in members), n=len(values),
            median_tps=statistics.median(values), mean_tps=statistics.fmean(values), cv=cv,
            flagged=cv is not None and cv > cv_threshold, repeats_needed=needed,
            more_repeats=max(0, needed - len(values)) if needed is not None else None,
            prompt_level=getattr(members[0], "prompt_level", None),
        ))
    return summaries


def median_statuses(statuses: Sequence[RowStatus]) -> list[RowStatus]:
    """One included status per cell of the included rows, carrying the cell's median TPS.

    Feed these to `model.calibrate` or `lsq.fit` to calibrate on cell medians instead of
    on every row; each is the cell's first row's status with the median TPS.
    """
    result = []
    for cell in summarize([s for s in statuses if s.included and s.tps > 0]):
        first = next(s for s in statuses if s.exp_id == cell.exp_ids[0])
        result.append(dataclasses.replace(first, tps=cell.median_tps, ln_tps=math.log(cell.median_tps)))
    return result
