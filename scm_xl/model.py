"""The Python reference implementation of the SCM calibration (no I/O).

TPS = BaseTPS x f(concurrency) x K_len(max_tokens) x K_in(prompt level) / C_model(model)

Everything the workbook computes with formulas is computed here too, with the
same rules, so the verifier can compare the two cell by cell:

1. Physical filter. A row is excluded when it produced no output, when it had
   failed or rate-limited requests, or when its TPS is below that of a
   lower-concurrency row of the same model, max_tokens and prompt level ("TPS
   does not fall as concurrency rises"). A manual include/exclude override wins.
2. Calibration by the article's chain, on included rows. Replicates that
   identify the same coefficient are combined by their geometric mean. The
   base point has a prompt level too, P0 (`base_prompt_level`: the hand-set
   one, else the smallest `prompt_level` of the rows); a row with a blank
   prompt_level counts as P0, and with no levels anywhere every row is at P0.
   BaseTPS, f, K_len and C_model are identified by rows at P0 only.
     BaseTPS      TPS at the base point (base model, base max_tokens, base concurrency, P0)
     f(c)         TPS(base model, base length, c, P0) / BaseTPS
     K_len(L)     TPS(base model, L, c*, P0) / (BaseTPS f(c*)), c* the lowest concurrency
                  at L whose f is known (the "anchor")
     K_in(P)      TPS(base model, base length, c*, P) / (BaseTPS f(c*)), c* the lowest
                  concurrency at P whose f is known (K_in(P0) = 1)
     C_model(m)   BaseTPS / TPS(m at the base point)
3. Consistency. Each included row is `identify` (it defines a coefficient, so
   its deviation is ~0 by construction), `check` (every coefficient it needs
   came from other rows: the real test) or `unidentified` (a coefficient is
   missing). The verdict is judged on check rows only.

Model names are compared case-insensitively, as spreadsheet criteria do.

Long because it is one rule set: the filter, the cells it groups rows into (in the cells
sheet's order), the chain calibration, the consistency roles and the inverse, each the
mirror of workbook formulas; split, the rules that must agree would sit in different files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

if TYPE_CHECKING:
    import pandas as pd

from scm_xl.results import has_fault
from scm_xl.roofline import PRECISION_BYTES
from scm_xl.physics import PhysicsCatalog, per_token_figures, physics_catalog
from scm_xl.rules import (
    DEFAULT_METHOD, DEFAULT_PHYSICS_PRECISION, DEFAULT_SHORT_OUTPUT_RATIO, SUPERLINEAR_TOLERANCE, TEXTS, Lang, verdict_for,
)

# Guard against text round trips of numbers inside spreadsheet criteria
# (">"&x is rendered with 15 significant digits by some engines).
MONOTONIC_EPSILON = 1e-9
# The base max_tokens the article uses; taken when measured, else the smallest length.
PREFERRED_BASE_MAX_TOKENS = 50


class KeyedRow(Protocol):
    """A row's id and its cell (model, concurrency, max_tokens). Read-only properties (here and
    in the protocols built on it), so that frozen dataclasses (ResultRow) satisfy them."""

    @property
    def exp_id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...


class RowLike(KeyedRow, Protocol):
    @property
    def total_requests(self) -> int: ...
    @property
    def total_time_s(self) -> float: ...
    @property
    def total_output_tokens(self) -> int: ...
    @property
    def failed_requests(self) -> int | None: ...
    @property
    def rate_limited_requests(self) -> int | None: ...
    @property
    def override(self) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Hand-set calibration choices; None means automatic."""

    base_model: str | None = None
    base_max_tokens: int | None = None
    base_concurrency: int | None = None
    # The prompt level of the base point (results column prompt_level): BaseTPS, f, K_len and
    # C_model are identified there, K_in(P) elsewhere; None: the smallest level present.
    base_prompt_level: int | None = None
    monotonic_tolerance_pct: float = 0.0
    # Physics checks are warnings unless strict_physics; then a warned row is excluded
    # (a manual include still wins).
    strict_physics: bool = False
    short_output_ratio: float = DEFAULT_SHORT_OUTPUT_RATIO
    physics_precision: str = DEFAULT_PHYSICS_PRECISION
    catalog: PhysicsCatalog | None = None
    method: str = DEFAULT_METHOD  # which coefficients the workbook's forward and inverse answers use
    # Level slots in the workbook; levels beyond them are not calibrated. None = unbounded.
    concurrency_slots: int | None = None
    length_slots: int | None = None
    model_slots: int | None = None
    cell_slots: int | None = None
    prompt_slots: int | None = None


@dataclass(frozen=True)
class RowStatus:
    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    tps: float
    ln_tps: float | None
    fault: bool
    eligible: bool
    faster_lower_tps: float  # highest eligible TPS at a lower concurrency, same model and max_tokens (0: none)
    monotonic_violation: bool
    included: bool
    reason_code: str  # "", "no_output", "manual_exclude", "manual_include", "fault", "mono", "physics"
    physics: "PhysicsChecks"
    # The row's prompt level, a blank one counted as the base level (None: no levels anywhere).
    prompt_level: int | None = None

    def reason(self, lang: Lang = "en") -> str:
        if not self.reason_code:
            return ""
        return TEXTS[lang][self.reason_code]


@dataclass(frozen=True)
class PhysicsChecks:
    """What physics says about one row (the second seed): each a warning by default."""

    model_id: int
    gpu_id: int
    short_output: bool
    expected_tokens: int
    output_tokens: int
    group_lowest_concurrency: int  # 0 when no eligible row shares the model and max_tokens
    superlinear: bool
    ceiling_tps: float | None  # per-stream decode ceiling from the roofline (batch 1)
    above_ceiling: bool
    kv_over_memory: bool
    concurrency: int

    @property
    def count(self) -> int:
        return sum((self.short_output, self.superlinear, self.above_ceiling, self.kv_over_memory))

    def codes(self) -> list[str]:
        return [code for code, flag in (("short_output", self.short_output), ("superlinear", self.superlinear),
                                        ("over_ceiling", self.above_ceiling), ("kv_over", self.kv_over_memory))
                if flag]

    def text(self, lang: Lang = "en") -> str:
        texts = TEXTS[lang]
        values = {
            "tokens": str(self.output_tokens), "expected": str(self.expected_tokens),
            "c0": str(self.group_lowest_concurrency), "c": str(self.concurrency),
            "ceiling": str(round_half_up(self.ceiling_tps)) if self.ceiling_tps is not None else "",
        }
        parts = []
        for code in self.codes():
            text = texts[code]
            for key, value in values.items():
                text = text.replace("{" + key + "}", value)
            parts.append(text)
        return "; ".join(parts)


def round_half_up(value: float) -> int:
    """ROUND(x, 0) as spreadsheets do it: halves away from zero."""
    return int(Decimal(repr(value)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def physics_bytes(precision: str) -> float:
    return float(PRECISION_BYTES.get(precision.strip().casefold(), 2.0))


@dataclass(frozen=True)
class ConcurrencyLevel:
    concurrency: int
    rows: int
    f: float | None


@dataclass(frozen=True)
class LengthLevel:
    max_tokens: int
    anchor_concurrency: int | None
    rows: int | None
    k_len: float | None


@dataclass(frozen=True)
class PromptLevel:
    prompt_level: int
    anchor_concurrency: int | None
    rows: int | None
    k_in: float | None


@dataclass(frozen=True)
class ModelLevel:
    model: str
    rows: int
    base_point_tps: float | None
    c_model: float | None


@dataclass
class Calibration:
    base_model: str | None
    base_max_tokens: int | None
    base_concurrency: int | None
    base_rows: int
    base_tps: float | None
    concurrency_levels: list[ConcurrencyLevel]
    length_levels: list[LengthLevel]
    models: list[ModelLevel]
    base_prompt_level: int | None = None  # P0; None: no prompt levels anywhere
    prompt_levels: list[PromptLevel] = field(default_factory=list)  # every level of the rows, smallest first

    def f(self, concurrency: float) -> float | None:
        for level in self.concurrency_levels:
            if level.concurrency == concurrency:
                return level.f
        return None

    def k_len(self, max_tokens: float) -> float | None:
        for level in self.length_levels:
            if level.max_tokens == max_tokens:
                return level.k_len
        return None

    def anchor(self, max_tokens: float) -> int | None:
        for level in self.length_levels:
            if level.max_tokens == max_tokens:
                return level.anchor_concurrency
        return None

    def k_in(self, prompt_level: float | None) -> float | None:
        """K_in at a level of the table (1 for a row without a level when there are none)."""
        if prompt_level is None:
            return 1.0 if self.base_prompt_level is None else None
        for level in self.prompt_levels:
            if level.prompt_level == prompt_level:
                return level.k_in
        return None

    def prompt_anchor(self, prompt_level: float | None) -> int | None:
        for level in self.prompt_levels:
            if level.prompt_level == prompt_level:
                return level.anchor_concurrency
        return None

    def k_in_at(self, prompt_tokens: float | None) -> float | None:
        """K_in for a workload's prompt length: 1 when none is given (the base level); at a
        level with a known K_in, that; between two, ln K_in linear in ln P (log-log, as
        `lsq.concurrency_blend` does for f); outside the known levels, None."""
        if prompt_tokens is None:
            return 1.0
        return interpolate_k_in(prompt_tokens, [(lv.prompt_level, lv.k_in) for lv in self.prompt_levels])

    def c_model(self, model: str) -> float | None:
        level = self.model_level(model)
        return level.c_model if level else None

    def model_level(self, model: str) -> ModelLevel | None:
        for level in self.models:
            if same_model(level.model, model):
                return level
        return None


@dataclass(frozen=True)
class RowCheck:
    status: RowStatus
    f: float | None
    k_len: float | None
    c_model: float | None
    anchor_concurrency: int  # 0 when the row's length has no anchor
    predicted_tps: float | None
    deviation: float | None  # measured - predicted
    deviation_pct: float | None  # (measured - predicted) / measured x 100
    role: str  # identify | check | unidentified | excluded
    identifies: tuple[str, ...]  # coefficient labels an identify row defines
    missing: tuple[str, ...]  # coefficient labels an unidentified row lacks
    k_in: float | None = None  # K_in at the row's prompt level (1 with no levels anywhere)
    prompt_anchor: int = 0  # the anchor concurrency of the row's prompt level (0: none or no levels)

    def note(self, lang: Lang = "en") -> str:
        texts = TEXTS[lang]
        if self.role == "excluded":
            return self.status.reason(lang)
        if self.role == "identify":
            return f"{texts['identifies']} " + ", ".join(self.identifies)
        if self.role == "unidentified":
            return f"{texts['missing']} " + ", ".join(self.missing)
        return ""


@dataclass(frozen=True)
class Consistency:
    check_rows: int
    identify_rows: int
    unidentified_rows: int
    excluded_rows: int
    mape_pct: float | None
    max_deviation_pct: float | None
    verdict: str


ANALYSIS_FRAME_COLUMNS = ("exp_id", "model", "concurrency", "max_tokens", "tps", "included", "reason", "role",
                          "predicted_tps", "deviation_pct", "physics_warnings")


@dataclass
class Analysis:
    settings: Settings
    statuses: list[RowStatus]
    calibration: Calibration
    checks: list[RowCheck]
    consistency: Consistency
    base_prompt_level: int | None = None  # the base point's prompt level (model.base_prompt_level)

    def to_frame(self) -> pd.DataFrame:
        """One row per experiment, as a pandas DataFrame: measured TPS, whether it is included and
        why not, its role, the prediction and deviation, and its physics warnings."""
        import pandas as pd

        records = []
        for check in self.checks:
            status = check.status
            records.append({
                "exp_id": status.exp_id, "model": status.model, "concurrency": status.concurrency,
                "max_tokens": status.max_tokens, "tps": status.tps, "included": status.included,
                "reason": status.reason("en") or None, "role": check.role, "predicted_tps": check.predicted_tps,
                "deviation_pct": check.deviation_pct, "physics_warnings": status.physics.text("en") or None,
            })
        return pd.DataFrame.from_records(records, columns=list(ANALYSIS_FRAME_COLUMNS))


@dataclass(frozen=True)
class Prediction:
    tps: float | None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Solution:
    target_tps: float
    max_tokens: int
    model: str | None
    concurrency: int | None
    tps: float | None
    reachable: bool
    best_concurrency: int | None
    best_tps: float | None
    table: list[tuple[int, float | None]] = field(default_factory=list)


def same_model(a: str, b: str) -> bool:
    return a.casefold() == b.casefold()


def f_label(concurrency: float) -> str:
    return f"f({concurrency})"


def k_label(max_tokens: float) -> str:
    return f"K_len({max_tokens})"


def c_label(model: str) -> str:
    return f"C_model({model})"


def p_label(prompt_level: float) -> str:
    return f"K_in({prompt_level})"


def k_in_bracket(prompt_tokens: float, levels: Iterable[tuple[int, float | None]]
                 ) -> tuple[int | None, int | None, float | None, float | None]:
    """The nearest levels with a known K_in at or below and at or above `prompt_tokens`, and
    their K_in (None where there is none)."""
    known = [(level, k) for level, k in levels if k is not None and k > 0]
    below = [level for level, _ in known if level <= prompt_tokens]
    above = [level for level, _ in known if level >= prompt_tokens]
    low = max(below) if below else None
    high = min(above) if above else None
    k_low = next(k for level, k in known if level == low) if low is not None else None
    k_high = next(k for level, k in known if level == high) if high is not None else None
    return low, high, k_low, k_high


def interpolate_k_in(prompt_tokens: float, levels: Iterable[tuple[int, float | None]]) -> float | None:
    """K_in at `prompt_tokens` from (level, K_in) pairs: a level's own value, ln K_in linear in
    ln P between the nearest known levels below and above, None outside them (the workbook's
    forward cell computes the same, in the same order)."""
    low, high, k_low, k_high = k_in_bracket(prompt_tokens, levels)
    if low is None or high is None or k_low is None or k_high is None:
        return None
    if low == high:
        return k_low
    return math.exp(math.log(k_low) + (math.log(prompt_tokens) - math.log(low)) / (math.log(high) - math.log(low))
                    * (math.log(k_high) - math.log(k_low)))


def row_tps(row: RowLike) -> float:
    return row.total_output_tokens / row.total_time_s


# ---------------------------------------------------------------------------
# 1. Physical filter
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    """Eligible rows of one (model, max_tokens, prompt level, concurrency), and what the filter
    needs of its group (the same model, max_tokens and prompt level)."""

    key: tuple[str, int, int, int]  # (model casefolded, max_tokens, prompt level's slot (0: no levels), concurrency)
    first_row: int  # 1-based position of its first row
    model: str
    max_tokens: int
    concurrency: int
    rows: int
    eligible: int
    max_tps: float  # 0 when no eligible row
    mean_ln: float | None
    lower_max: float = 0.0  # highest max_tps at a lower concurrency of the same group
    group_low_c: int = 0  # lowest concurrency of the group with an eligible row
    group_base: float | None = None  # geometric-mean TPS there
    prompt_level: int | None = None


def model_numbers(rows: Sequence[KeyedRow], slots: int | None = None) -> dict[str, int]:
    """Each model (casefolded) -> its number, 1 for the first to appear, 2 for the next...
    (at most `slots` models: the workbook's seen-models table)."""
    numbers: dict[str, int] = {}
    for row in rows:
        key = row.model.casefold()
        if key not in numbers and (slots is None or len(numbers) < slots):
            numbers[key] = len(numbers) + 1
    return numbers


def base_prompt_level(rows: Sequence[object], settings: Settings = Settings()) -> int | None:
    """The prompt level of the base point: the hand-set one, else the smallest `prompt_level`
    among the rows (None: no row has one)."""
    if settings.base_prompt_level is not None:
        return settings.base_prompt_level
    levels = [level for r in rows if (level := getattr(r, "prompt_level", None)) is not None and level > 0]
    return min(levels) if levels else None


def at_base_prompt(row: object, base_level: int | None) -> bool:
    """A row without a prompt level, or with the base one."""
    level = getattr(row, "prompt_level", None)
    return level is None or base_level is None or level == base_level


def effective_prompt_level(row: object, base_level: int | None) -> int | None:
    """The row's prompt level, a blank one counted as the base level."""
    level = getattr(row, "prompt_level", None)
    return level if level is not None else base_level


def prompt_level_table(rows: Sequence[object], base_level: int | None, slots: int | None = None) -> list[int]:
    """The prompt levels of the rows (blank ones counted as the base level), smallest first: the
    K_in table's levels, at most `slots` of them. Empty when no row has a level (and none is set)."""
    return _distinct_sorted((level for r in rows if (level := effective_prompt_level(r, base_level)) is not None),
                            slots)


def prompt_index(row: object, base_level: int | None, table: Sequence[int]) -> int | None:
    """The row's prompt level's place in `prompt_level_table` (1-based), 0 when there are no
    levels, None when its level is beyond the table's slots."""
    level = effective_prompt_level(row, base_level)
    if level is None:
        return 0
    return table.index(level) + 1 if level in table else None


def cell_order(rows: Sequence[KeyedRow], model_slots: int | None = None,
               slots: int | None = None, *, base_level: int | None = None,
               prompt_levels: Sequence[int] = ()) -> dict[tuple[str, int, int, int], list[int]]:
    """The distinct (model casefolded, max_tokens, prompt slot, concurrency) of `rows`, each with
    the indexes of its rows, as the cells sheet lists them: by model number, then max_tokens,
    then prompt level, then concurrency; only models with a number and levels with a slot in
    `prompt_levels` (`prompt_level_table`), at most `slots` cells."""
    numbers = model_numbers(rows, model_slots)
    members: dict[tuple[str, int, int, int], list[int]] = {}
    for i, row in enumerate(rows):
        index = prompt_index(row, base_level, prompt_levels)
        if row.model.casefold() in numbers and index is not None:
            members.setdefault((row.model.casefold(), row.max_tokens, index, row.concurrency), []).append(i)
    ordered = sorted(members, key=lambda key: (numbers[key[0]], key[1], key[2], key[3]))[:slots]
    return {key: members[key] for key in ordered}


def cells_of(rows: Sequence[RowLike], tps: list[float], eligible: list[bool],
             slots: int | None = None, model_slots: int | None = None, *, base_level: int | None = None,
             prompt_levels: Sequence[int] = ()) -> list[Cell]:
    """Cells as the cells sheet lists them (`cell_order`: at most `slots`)."""
    cells = []
    for key, members in cell_order(rows, model_slots, slots, base_level=base_level,
                                   prompt_levels=prompt_levels).items():
        good = [i for i in members if eligible[i]]
        first = rows[members[0]]
        cells.append(Cell(key=key, first_row=members[0] + 1, model=first.model, max_tokens=first.max_tokens,
                          concurrency=first.concurrency, rows=len(members), eligible=len(good),
                          max_tps=max((tps[i] for i in good), default=0.0),
                          mean_ln=sum(math.log(tps[i]) for i in good) / len(good) if good else None,
                          prompt_level=prompt_levels[key[2] - 1] if key[2] > 0 else None))
    done = []
    for cell in cells:
        group = [o for o in cells if o.key[:3] == cell.key[:3] and o.eligible > 0]
        lower = [o.max_tps for o in group if o.concurrency < cell.concurrency]
        low_c = min((o.concurrency for o in group), default=0)
        base = next((o.mean_ln for o in group if o.concurrency == low_c), None)
        done.append(Cell(**{**cell.__dict__, "lower_max": max(lower, default=0.0), "group_low_c": low_c,
                            "group_base": math.exp(base) if base is not None else None}))
    return done


def filter_rows(rows: Sequence[RowLike], settings: Settings = Settings()) -> list[RowStatus]:
    tps = [row_tps(r) for r in rows]
    ln = [math.log(t) if t > 0 else None for t in tps]
    fault = [has_fault(r) for r in rows]
    eligible = [not fault[i] and tps[i] > 0 and r.override != "exclude" for i, r in enumerate(rows)]
    factor = 1 + settings.monotonic_tolerance_pct / 100 + MONOTONIC_EPSILON
    catalog = settings.catalog or physics_catalog()
    nbytes = physics_bytes(settings.physics_precision)
    base_level = base_prompt_level(rows, settings)
    levels = prompt_level_table(rows, base_level, settings.prompt_slots)
    by_key = {cell.key: cell for cell in cells_of(rows, tps, eligible, settings.cell_slots, settings.model_slots,
                                                  base_level=base_level, prompt_levels=levels)}
    statuses = []
    for i, row in enumerate(rows):
        index = prompt_index(row, base_level, levels)
        cell = by_key.get((row.model.casefold(), row.max_tokens, index, row.concurrency)) \
            if index is not None else None
        lower_max = cell.lower_max if cell else 0.0
        violation = lower_max > tps[i] * factor
        physics = _physics(i, rows, tps, cell, settings, catalog, nbytes)
        if tps[i] <= 0:
            included, code = False, "no_output"
        elif row.override == "exclude":
            included, code = False, "manual_exclude"
        elif row.override == "include":
            included, code = True, "manual_include"
        elif fault[i]:
            included, code = False, "fault"
        elif violation:
            included, code = False, "mono"
        elif settings.strict_physics and physics.count > 0:
            included, code = False, "physics"
        else:
            included, code = True, ""
        statuses.append(RowStatus(
            exp_id=row.exp_id, model=row.model, concurrency=row.concurrency,
            max_tokens=row.max_tokens, tps=tps[i], ln_tps=ln[i],
            fault=fault[i], eligible=eligible[i], faster_lower_tps=lower_max, monotonic_violation=violation,
            included=included, reason_code=code, physics=physics,
            prompt_level=effective_prompt_level(row, base_level),
        ))
    return statuses


def _physics(i: int, rows: Sequence[RowLike], tps: list[float], cell: Cell | None, settings: Settings,
             catalog: PhysicsCatalog, nbytes: float) -> PhysicsChecks:
    row = rows[i]
    expected = row.max_tokens * row.total_requests
    short = row.total_output_tokens < settings.short_output_ratio * expected

    lowest = cell.group_low_c if cell else 0
    superlinear = False
    if lowest > 0 and row.concurrency > lowest and cell is not None and cell.group_base:
        superlinear = tps[i] / cell.group_base > row.concurrency / lowest * (1 + SUPERLINEAR_TOLERANCE)

    model_id = catalog.model_id(row.model)
    gpu_name = getattr(row, "gpu", None)
    gpu_id = catalog.gpu_id(gpu_name)
    ceiling = None
    above = kv_over = False
    if model_id and gpu_id:
        spec = catalog.models[model_id - 1][1]
        gpu = catalog.gpus[gpu_id - 1][1]
        figures = per_token_figures(spec, nbytes)  # the catalog table's physics columns
        ceiling = gpu.memory_bandwidth / figures["phys_read_bytes"]
        above = tps[i] / row.concurrency > ceiling * (1 + MONOTONIC_EPSILON)
        prompt = getattr(row, "prompt_tokens", None) or 0
        needed = figures["phys_weight_bytes"] + row.concurrency * figures["phys_kv_bytes_per_token"] \
            * (prompt + row.max_tokens)
        kv_over = gpu.memory_bytes is not None and needed > gpu.memory_bytes
    return PhysicsChecks(
        model_id=model_id, gpu_id=gpu_id, short_output=short, expected_tokens=expected,
        output_tokens=row.total_output_tokens, group_lowest_concurrency=lowest, superlinear=superlinear,
        ceiling_tps=ceiling, above_ceiling=above, kv_over_memory=kv_over, concurrency=row.concurrency,
    )


# ---------------------------------------------------------------------------
# 2. Calibration by the chain
# ---------------------------------------------------------------------------

def _geomean_tps(statuses: Iterable[RowStatus]) -> tuple[int, float | None]:
    logs = [s.ln_tps for s in statuses if s.ln_tps is not None]
    if not logs:
        return 0, None
    return len(logs), math.exp(sum(logs) / len(logs))


def _distinct_sorted(values: Iterable[int], limit: int | None) -> list[int]:
    levels = sorted(set(values))
    return levels[:limit] if limit is not None else levels


def calibrate(statuses: Sequence[RowStatus], settings: Settings = Settings()) -> Calibration:
    included = [s for s in statuses if s.included]
    base_level = base_prompt_level(statuses, settings)  # a status's level is its effective one
    # BaseTPS, f, K_len and C_model come from rows at the base prompt level only.
    at_base_prompt_level = [s for s in included if at_base_prompt(s, base_level)]

    base_model = settings.base_model if settings.base_model else (
        at_base_prompt_level[0].model if at_base_prompt_level else None)
    of_base_model_any_level = [s for s in included if base_model is not None and same_model(s.model, base_model)]
    of_base_model = [s for s in of_base_model_any_level if at_base_prompt(s, base_level)]

    if settings.base_max_tokens is not None:
        base_max_tokens: int | None = settings.base_max_tokens
    elif any(s.max_tokens == PREFERRED_BASE_MAX_TOKENS for s in of_base_model):
        base_max_tokens = PREFERRED_BASE_MAX_TOKENS
    elif of_base_model:
        base_max_tokens = min(s.max_tokens for s in of_base_model)
    else:
        base_max_tokens = None

    at_base_length = [s for s in of_base_model if s.max_tokens == base_max_tokens]
    if settings.base_concurrency is not None:
        base_concurrency: int | None = settings.base_concurrency
    elif at_base_length:
        base_concurrency = min(s.concurrency for s in at_base_length)
    else:
        base_concurrency = None

    base_rows, base_tps = _geomean_tps(s for s in at_base_length if s.concurrency == base_concurrency)

    concurrency_levels = []
    for c in _distinct_sorted((s.concurrency for s in included), settings.concurrency_slots):
        n, tps = _geomean_tps(s for s in at_base_length if s.concurrency == c)
        f = tps / base_tps if (n > 0 and base_tps is not None and tps is not None) else None
        concurrency_levels.append(ConcurrencyLevel(concurrency=c, rows=n, f=f))
    f_of = {level.concurrency: level.f for level in concurrency_levels if level.f is not None}

    length_levels = []
    for length in _distinct_sorted((s.max_tokens for s in included), settings.length_slots):
        candidates = [s for s in of_base_model if s.max_tokens == length and s.concurrency in f_of]
        if not candidates:
            length_levels.append(LengthLevel(max_tokens=length, anchor_concurrency=None, rows=None, k_len=None))
            continue
        anchor = min(s.concurrency for s in candidates)
        n, tps = _geomean_tps(s for s in candidates if s.concurrency == anchor)
        k = tps / (base_tps * f_of[anchor]) if (tps is not None and base_tps is not None) else None
        length_levels.append(LengthLevel(max_tokens=length, anchor_concurrency=anchor, rows=n, k_len=k))

    # K_in: every prompt level of the rows (present, not only included: the workbook numbers the
    # cells by it), anchored like K_len at the lowest concurrency with a known f.
    prompt_levels = []
    for level in prompt_level_table(statuses, base_level, settings.prompt_slots):
        candidates = [s for s in of_base_model_any_level if s.prompt_level == level
                      and s.max_tokens == base_max_tokens and s.concurrency in f_of]
        if not candidates:
            prompt_levels.append(PromptLevel(prompt_level=level, anchor_concurrency=None, rows=None, k_in=None))
            continue
        anchor = min(s.concurrency for s in candidates)
        n, tps = _geomean_tps(s for s in candidates if s.concurrency == anchor)
        k = tps / (base_tps * f_of[anchor]) if (tps is not None and base_tps is not None) else None
        prompt_levels.append(PromptLevel(prompt_level=level, anchor_concurrency=anchor, rows=n, k_in=k))

    models: list[ModelLevel] = []
    for s in included:
        if any(same_model(m.model, s.model) for m in models):
            continue
        if settings.model_slots is not None and len(models) >= settings.model_slots:
            break
        n, tps = _geomean_tps(
            r for r in at_base_prompt_level
            if same_model(r.model, s.model) and r.concurrency == base_concurrency and r.max_tokens == base_max_tokens
        )
        c_model = base_tps / tps if (n > 0 and tps is not None and base_tps is not None) else None
        models.append(ModelLevel(model=s.model, rows=n, base_point_tps=tps, c_model=c_model))

    return Calibration(
        base_model=base_model, base_max_tokens=base_max_tokens, base_concurrency=base_concurrency,
        base_rows=base_rows, base_tps=base_tps, concurrency_levels=concurrency_levels,
        length_levels=length_levels, models=models, base_prompt_level=base_level, prompt_levels=prompt_levels,
    )


# ---------------------------------------------------------------------------
# 3. Consistency
# ---------------------------------------------------------------------------

def check_rows(statuses: Sequence[RowStatus], cal: Calibration) -> list[RowCheck]:
    checks = []
    for s in statuses:
        if not s.included:
            checks.append(RowCheck(s, None, None, None, 0, None, None, None, "excluded", (), ()))
            continue
        f, k, c = cal.f(s.concurrency), cal.k_len(s.max_tokens), cal.c_model(s.model)
        k_in = cal.k_in(s.prompt_level)
        anchor = cal.anchor(s.max_tokens) or 0
        prompt_anchor = cal.prompt_anchor(s.prompt_level) or 0
        predicted = None
        if f is not None and k is not None and c is not None and k_in is not None and cal.base_tps is not None:
            predicted = cal.base_tps * f * k * k_in / c
        is_base_model = cal.base_model is not None and same_model(s.model, cal.base_model)
        at_base_length = s.max_tokens == cal.base_max_tokens
        at_p0 = at_base_prompt(s, cal.base_prompt_level)
        identifies_f = is_base_model and at_base_length and at_p0
        identifies_k = is_base_model and s.concurrency == anchor and at_p0
        identifies_c = (not is_base_model) and s.concurrency == cal.base_concurrency and at_base_length and at_p0
        identifies_p = is_base_model and at_base_length and s.concurrency == prompt_anchor and not at_p0
        if is_base_model and at_base_length and s.concurrency == cal.base_concurrency and at_p0:
            identifies: tuple[str, ...] = ("BaseTPS",)
        else:
            identifies = tuple(label for flag, label in (
                (identifies_f, f_label(s.concurrency)),
                (identifies_k, k_label(s.max_tokens)),
                (identifies_c, c_label(s.model)),
                (identifies_p, p_label(s.prompt_level or 0)),
            ) if flag)
        missing = tuple(label for value, label in (
            (f, f_label(s.concurrency)), (k, k_label(s.max_tokens)), (c, c_label(s.model)),
            (k_in, p_label(s.prompt_level or 0)),
        ) if value is None)
        if identifies_f or identifies_k or identifies_c or identifies_p:
            role = "identify"
        elif predicted is not None:
            role = "check"
        else:
            role = "unidentified"
        deviation = s.tps - predicted if predicted is not None else None
        deviation_pct = deviation / s.tps * 100 if deviation is not None else None
        checks.append(RowCheck(
            s, f, k, c, anchor, predicted, deviation, deviation_pct, role,
            identifies if role == "identify" else (), missing if role == "unidentified" else (),
            k_in=k_in, prompt_anchor=prompt_anchor,
        ))
    return checks


def summarize(checks: Sequence[RowCheck]) -> Consistency:
    errors = [abs(c.deviation_pct) for c in checks if c.role == "check" and c.deviation_pct is not None]
    count = {role: sum(1 for c in checks if c.role == role) for role in ("identify", "check", "unidentified", "excluded")}
    mape = sum(errors) / len(errors) if errors else None
    max_dev = max(errors) if errors else None
    return Consistency(
        check_rows=count["check"], identify_rows=count["identify"],
        unidentified_rows=count["unidentified"], excluded_rows=count["excluded"],
        mape_pct=mape, max_deviation_pct=max_dev, verdict=verdict_for(mape, max_dev, count["check"]),
    )


def analyze(rows: Sequence[RowLike], settings: Settings = Settings()) -> Analysis:
    statuses = filter_rows(rows, settings)
    cal = calibrate(statuses, settings)
    checks = check_rows(statuses, cal)
    return Analysis(settings=settings, statuses=statuses, calibration=cal, checks=checks,
                    consistency=summarize(checks), base_prompt_level=base_prompt_level(rows, settings))


# ---------------------------------------------------------------------------
# 4. Forward and inverse
# ---------------------------------------------------------------------------

def predict(cal: Calibration, concurrency: float, max_tokens: float, model: str | None = None,
            prompt_tokens: float | None = None) -> Prediction:
    """TPS at a configuration; `prompt_tokens` None is the base prompt level (K_in = 1), a
    measured level takes its K_in, a length between two known levels is interpolated in log-log
    (`Calibration.k_in_at`), one outside them is not identified (missing K_in(P))."""
    model = model or cal.base_model or ""
    f, k, c = cal.f(concurrency), cal.k_len(max_tokens), cal.c_model(model)
    k_in = cal.k_in_at(prompt_tokens)
    missing = tuple(label for value, label in (
        (f, f_label(_int_or(concurrency))), (k, k_label(_int_or(max_tokens))), (c, c_label(model)),
        (k_in, p_label(_int_or(prompt_tokens or 0))),
    ) if value is None)
    if f is None or k is None or c is None or k_in is None or cal.base_tps is None:  # missing names the factors
        return Prediction(tps=None, missing=missing)
    return Prediction(tps=cal.base_tps * f * k * k_in / c)


def solve(cal: Calibration, target_tps: float, max_tokens: float, model: str | None = None,
          prompt_tokens: float | None = None) -> Solution:
    """The smallest measured concurrency whose prediction meets the target (at `prompt_tokens`,
    None: the base prompt level)."""
    table = []
    for level in cal.concurrency_levels:
        table.append((level.concurrency, predict(cal, level.concurrency, max_tokens, model, prompt_tokens).tps))
    meeting = [(c, tps) for c, tps in table if tps is not None and tps >= target_tps]
    known = [(c, tps) for c, tps in table if tps is not None]
    best = max(known, key=lambda item: item[1]) if known else (None, None)
    # Ties in the best TPS resolve to the first (lowest) concurrency, as MATCH does.
    if known:
        best = next(item for item in known if item[1] == best[1])
    concurrency, tps = min(meeting, key=lambda item: item[0]) if meeting else (None, None)
    return Solution(
        target_tps=target_tps, max_tokens=int(max_tokens), model=model or cal.base_model,
        concurrency=concurrency, tps=tps, reachable=bool(meeting),
        best_concurrency=best[0], best_tps=best[1], table=table,
    )


def _int_or(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
