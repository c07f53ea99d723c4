"""Has the service level changed since the baseline? Both sides' requests judged under one SLO.

`compare --slo` reads the per-request CSV beside each side (scm_xl.goodput.read_samples) and pools
each configuration's requests (goodput.cells, repeats together). For every configuration measured
on both sides it shows the attainment with its Wilson 95% interval, old and new, and flags a
configuration that met the SLO in the baseline (the interval's lower end at or above the target)
and no longer does in the new run. Configurations measured on one side only are counted, not
compared. Like the latency comparison, this does not change the coefficient verdict: a service
can keep its throughput and lose its latency SLO, and the person should see both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scm_xl import goodput

Key = tuple[str, int, int, int | None]  # model (case-blind), concurrency, max_tokens, prompt level


@dataclass(frozen=True)
class SloRow:
    """One configuration measured on both sides."""

    old: goodput.SloCell
    new: goodput.SloCell

    @property
    def dropped(self) -> bool:
        """Met the SLO in the baseline, not in the new run."""
        return self.old.meets and not self.new.meets

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.new.model, "concurrency": self.new.concurrency, "max_tokens": self.new.max_tokens,
                "prompt_level": self.new.prompt_level, "baseline": self.old.as_dict(), "new": self.new.as_dict(),
                "dropped_below_target": self.dropped}


@dataclass(frozen=True)
class SloComparison:
    slo: goodput.Slo
    rows: list[SloRow]
    only_baseline: int  # configurations judged in the baseline only
    only_new: int
    baseline_reason: str | None  # why the baseline's requests could not be judged (no CSV, ...)
    new_reason: str | None

    @property
    def dropped(self) -> list[SloRow]:
        return [row for row in self.rows if row.dropped]

    def as_dict(self) -> dict[str, Any]:
        return {"slo": self.slo.describe(), "attainment_target": self.slo.attainment,
                "rows": [row.as_dict() for row in self.rows], "dropped_below_target": len(self.dropped),
                "only_baseline": self.only_baseline, "only_new": self.only_new,
                "baseline_reason": self.baseline_reason, "new_reason": self.new_reason}


def _key(cell: goodput.SloCell) -> Key:
    return (cell.model.casefold(), cell.concurrency, cell.max_tokens, cell.prompt_level)


def _judged(source: str | Path, rows: Sequence[Any], slo: goodput.Slo) -> tuple[dict[Key, goodput.SloCell], str | None]:
    table = goodput.evaluate(rows, goodput.read_samples(source), slo)
    return {_key(cell): cell for cell in goodput.cells(table.experiments, slo)}, table.reason


def compare_slo(baseline: str | Path, baseline_rows: Sequence[Any], new: str | Path, new_rows: Sequence[Any],
                slo: goodput.Slo) -> SloComparison:
    """Judge both sides' requests under `slo`; `baseline` and `new` are the sources (the requests CSV
    is looked for beside each, where `scm-xl collect` writes it)."""
    old, old_reason = _judged(baseline, baseline_rows, slo)
    fresh, new_reason = _judged(new, new_rows, slo)
    shared = [key for key in fresh if key in old]
    rows = [SloRow(old[key], fresh[key]) for key in shared]
    rows.sort(key=lambda row: row.new.cost)
    return SloComparison(slo, rows, only_baseline=len(set(old) - set(fresh)), only_new=len(set(fresh) - set(old)),
                         baseline_reason=old_reason, new_reason=new_reason)


def _attainment(cell: goodput.SloCell) -> str:
    low, high = cell.tally.interval
    return f"{cell.tally.attainment:.1%} [{low:.1%}, {high:.1%}]"


def render_slo_comparison(c: SloComparison) -> list[str]:
    """Lines for the terminal: the SLO, each shared configuration's attainment old -> new, the drops."""
    lines = [f"Under the SLO {c.slo.describe()} (attainment target {c.slo.attainment:.0%}, Wilson 95% interval):"]
    for side, reason in (("baseline", c.baseline_reason), ("new", c.new_reason)):
        if reason is not None:
            lines.append(f"  {side}: {reason}; attainment not compared")
    if c.baseline_reason is not None or c.new_reason is not None:
        return lines
    if not c.rows:
        lines.append("  no configuration was judged on both sides")
    for row in c.rows:
        level = "" if row.new.prompt_level is None else f", prompt {row.new.prompt_level}"
        flag = "  DROPPED below the target" if row.dropped else ""
        lines.append(f"  {row.new.model} c={row.new.concurrency} max_tokens={row.new.max_tokens}{level}: "
                     f"{_attainment(row.old)} -> {_attainment(row.new)}{flag}")
    others = [f"{n} in the {side} only" for n, side in ((c.only_baseline, "baseline"), (c.only_new, "new run"))
              if n]
    if others:
        lines.append(f"  not compared: {', '.join(others)} (configuration(s) measured on one side)")
    lines.append(f"  {len(c.dropped)} configuration(s) met the SLO in the baseline and no longer do"
                 if c.rows else "")
    return [line for line in lines if line]
