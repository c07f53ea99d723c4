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
from scm_xl.compare_texts import words
from scm_xl.rules import Lang
from scm_xl.slo_texts import say

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


def render_slo_comparison(c: SloComparison, lang: Lang = "en") -> list[str]:
    """Lines for the terminal, in `lang`: the SLO, each shared configuration's attainment old -> new, the drops."""
    w = words(lang)
    lines = [w["slo_head"].format(slo=c.slo.describe(), target=c.slo.attainment)]
    for side, reason in (("side_baseline", c.baseline_reason), ("side_new", c.new_reason)):
        if reason is not None:  # goodput's reasons are slo_texts.Texts
            lines.append(w["slo_side_reason"].format(side=w[side], reason=say(reason, lang)))
    if c.baseline_reason is not None or c.new_reason is not None:
        return lines
    if not c.rows:
        lines.append(w["slo_none_shared"])
    for row in c.rows:
        level = "" if row.new.prompt_level is None else w["slo_row_prompt"].format(prompt=row.new.prompt_level)
        lines.append(w["slo_row"].format(model=row.new.model, c=row.new.concurrency, length=row.new.max_tokens,
                                         level=level, old=_attainment(row.old), new=_attainment(row.new),
                                         flag=w["slo_dropped_mark"] if row.dropped else ""))
    others = [w["slo_only"].format(n=n, side=w[side])
              for n, side in ((c.only_baseline, "only_baseline"), (c.only_new, "only_new")) if n]
    if others:
        lines.append(w["slo_not_compared"].format(others=w["list_sep"].join(others)))
    lines.append(w["slo_dropped"].format(n=len(c.dropped)) if c.rows else "")
    return [line for line in lines if line]
