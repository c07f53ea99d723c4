"""The results CSV: one row per experiment (a load test at one concurrency x max_tokens x model).

`scm-xl collect` writes it (`append_result`, `write_results`); `scm-xl fill` reads it
(`read_results`, or `read_results_many` for several files). Reading validates the whole
file and raises `InputError` naming `path:line: column:` at the first problem. Headers
may be the canonical English names (any case) or the seed article's Chinese ones.

Files are read as spreadsheet programs write them: UTF-8 with or without a BOM, UTF-16
("Unicode text", usually tab-separated), GB18030/GBK (Excel's "CSV" on a Chinese
Windows) and Windows-1252 (its "CSV" on a Western one), the last two told apart by
the evidence of their bytes (`_legacy_encoding`), named in a warning, and refused when the
evidence is unclear; the delimiter (comma, semicolon or tab) is taken from the header line.
A semicolon file may write numbers the European way, decimal comma and "." between
thousands (1.234,5): which convention a file uses is decided from all its numbers
(`_number_convention`), and a number that reads two ways in a file that shows neither is
refused; elsewhere a comma inside a number is refused, and a whole number written with dots
(2.000, 12.345.678) is read by the same rule from the file's other numbers (`_number_convention`).

Only regular files are read, and at most MAX_RESULTS_BYTES of each (`scm_xl.input_files`).

Long because it is the one home of the results CSV: its columns and their rules, the
reader of every dialect above, the writers, and the checks across files read together
(an exp_id in two files; shards of one matrix, `_check_shards`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

from scm_xl.error_texts import Joined, Phrase
from scm_xl.errors import InputError
from scm_xl.input_files import read_capped, refuse_non_regular
from scm_xl.outputs import atomic_write_text

REQUIRED_COLUMNS: tuple[str, ...] = (
    "exp_id", "model", "concurrency", "requests_per_slot", "total_requests",
    "max_tokens", "total_time_s", "total_output_tokens",
)
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "tps", "repeat", "ok_requests", "failed_requests", "rate_limited_requests",
    "latency_p50_s", "latency_p95_s", "latency_p99_s", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s",
    "mean_itl_s", "prompt_tokens", "prompt_level", "ttft_mean_s", "latency_mean_s", "gpu", "override", "notes",
    "matrix_id", "shard",
    # the provider's rate-limit headers as the collector saw them (scm_xl.collect.ratelimit)
    "ratelimit_limit_requests", "ratelimit_limit_tokens", "ratelimit_remaining_requests",
    "ratelimit_remaining_tokens", "ratelimit_reset_s", "retry_after_s",
)
RESULT_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
# The one home of each column's type (the workbook's reader takes them from here).
INT_COLUMNS: frozenset[str] = frozenset({
    "concurrency", "requests_per_slot", "total_requests", "max_tokens", "total_output_tokens",
    "repeat", "ok_requests", "failed_requests", "rate_limited_requests", "prompt_tokens", "prompt_level",
    "ratelimit_limit_requests", "ratelimit_limit_tokens", "ratelimit_remaining_requests", "ratelimit_remaining_tokens",
})
FLOAT_COLUMNS: frozenset[str] = frozenset({
    "tps", "total_time_s", "latency_p50_s", "latency_p95_s", "latency_p99_s",
    "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "mean_itl_s", "ttft_mean_s", "latency_mean_s",
    "ratelimit_reset_s", "retry_after_s",
})
NUMERIC_COLUMNS: frozenset[str] = INT_COLUMNS | FLOAT_COLUMNS
# Numeric columns a person types (tps is always recomputed), in the CSV's column order.
NUMERIC_INPUT_COLUMNS: tuple[str, ...] = tuple(c for c in RESULT_COLUMNS if c in NUMERIC_COLUMNS and c != "tps")
TEXT_COLUMNS: frozenset[str] = frozenset(RESULT_COLUMNS) - NUMERIC_COLUMNS
# Excel's limit on a cell's text; longer text would be cut silently when written.
MAX_CELL_TEXT = 32_767
# Excel stores no number closer to zero than this (it reads smaller ones as 0).
SMALLEST_SPREADSHEET_NUMBER = 2.2250738585072014e-308
# A spreadsheet cell is a double: above 2^53 not every whole number is there (2^53 + 1 is not).
MAX_WHOLE_NUMBER = 2**53
# The workbook numbers each (model, max_tokens, prompt level, concurrency) cell with one whole
# number (workbook.layout's cell code) and takes it apart with INT and MOD. The largest code is
# (models + 1) x (largest max_tokens + 1) x (prompt levels + 1) x (largest concurrency + 1) - 1
# and must stay below this: LibreOffice rounds a quotient to 15 significant digits before INT
# (INT(2 - 1/N) is 2 once N passes 2e14) and holds numbers within 2^-48 of each other equal
# (measured: codes of 1.95e14 decode right, of 2.3e14 and 3.9e14 wrong); ironcalc and the
# formulas engine are exact up to 2^53. `check_cell_codes` applies it.
MAX_CELL_CODE = 2 * 10**14
# A row's TPS (total_output_tokens / total_time_s), when not 0, lies within these: the engines take
# numbers this close to 0 for 0 (IronCalc read a TPS of 5e-17 as 0: "no output tokens") and lose the
# digits of ratios between TPS this far apart (a TPS of 5e18 broke the calibration); a workbook of
# rows from 1e-6 to 1e9 tok/s together verifies. One token in 11.6 days, a billion tokens a
# second. `check_tps` applies them.
MIN_TPS = 1e-6
MAX_TPS = 1e9
# The most of a results CSV read (one line per experiment: some 300,000 rows of every column).
MAX_RESULTS_BYTES = 64 * 1024 * 1024

# The seed article's table headers (its "max_tokens" and "TPS" match the English names).
CHINESE_HEADERS: dict[str, str] = {
    "实验编号": "exp_id", "并发数": "concurrency", "请求数/并发": "requests_per_slot",
    "总请求数": "total_requests", "模型": "model", "总耗时(s)": "total_time_s",
    "总耗时（s）": "total_time_s", "总输出Token": "total_output_tokens",
}
# Header cells are looked up after stripping whitespace and a BOM, lower-cased.
_HEADER_ALIASES: dict[str, str] = {name: name for name in RESULT_COLUMNS} | {
    header.lower(): canonical for header, canonical in CHINESE_HEADERS.items()}

_POSITIVE_COLUMNS = frozenset({
    "concurrency", "requests_per_slot", "total_requests", "max_tokens", "total_time_s", "prompt_level",
})
_NON_NEGATIVE_COLUMNS = NUMERIC_COLUMNS - _POSITIVE_COLUMNS

_OVERRIDE_WORDS: dict[str, str] = {
    "include": "include", "in": "include", "1": "include", "yes": "include", "纳入": "include",
    "exclude": "exclude", "ex": "exclude", "0": "exclude", "no": "exclude", "剔除": "exclude",
}

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_COMMA_DECIMAL = re.compile(r"[+-]?\d+,\d+")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
_DECIMAL_COMMA = re.compile(r"[+-]?\d*,\d+(?:[eE][+-]?\d+)?")
# A semicolon file's numbers, European style: "." between thousands, "," before the decimals.
_DOT_THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(?:\.\d{3})+(?:,\d*)?(?:[eE][+-]?\d+)?")
# One group of three digits after a single separator reads two ways: 2.000 is 2 or 2000, 2,000 is 2 or 2000.
_EITHER = re.compile(r"[+-]?[1-9]\d{0,2}[.,]\d{3}")
# Characters a spreadsheet cell cannot hold (openpyxl refuses them); identifiers also
# refuse tab and line breaks.
_ILLEGAL_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_IDENTIFIER_COLUMNS = frozenset({"exp_id", "model", "gpu", "override", "matrix_id", "shard"})
DELIMITERS = (",", ";", "\t")
_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}
_NOT_FINITE = frozenset({"nan", "inf", "infinity"})
_SHARD = re.compile(r"(\d{1,9})/(\d{1,9})")
# In COUNTIFS/AVERAGEIFS criteria * ? ~ are wildcards and a leading = < > is an operator,
# so such a model name would silently match other rows in the workbook.
_CRITERIA_WILDCARDS = "*?~"
_CRITERIA_OPERATORS = "=<>"
_MAX_QUOTED = 40


def has_fault(row: object) -> bool:
    """The fault rule, its one home: a row with failed or rate-limited requests.

    The physical filter excludes such rows and the solver leaves them out of its measured
    percentiles. Works on anything with the two count attributes (blank counts as 0).
    """
    return ((getattr(row, "failed_requests", None) or 0) + (getattr(row, "rate_limited_requests", None) or 0)) > 0


def normalise_override(value: str | None) -> str | None:
    """Map an override cell to "include", "exclude" or None (blank)."""
    if value is None or not value.strip():
        return None
    word = _OVERRIDE_WORDS.get(value.strip().lower())
    if word is None:
        raise InputError.worded("override", column="override", value=_quote(value))
    return word


@dataclass(frozen=True, kw_only=True, slots=True)
class ResultRow:
    """One experiment. Building one checks its values (InputError naming the field)."""

    exp_id: str
    model: str
    concurrency: int
    requests_per_slot: int
    total_requests: int
    max_tokens: int
    total_time_s: float
    total_output_tokens: int
    repeat: int | None = None
    ok_requests: int | None = None
    failed_requests: int | None = None
    rate_limited_requests: int | None = None
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    latency_p99_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_p99_s: float | None = None
    mean_itl_s: float | None = None
    prompt_tokens: int | None = None  # the server-counted mean prompt tokens per request
    prompt_level: int | None = None  # the requested prompt length (collect --prompt-tokens); blank: one prompt
    ttft_mean_s: float | None = None
    latency_mean_s: float | None = None
    gpu: str | None = None
    override: str | None = None
    notes: str | None = None
    matrix_id: str | None = None  # collect: a short hash of the whole matrix the row was measured in
    shard: str | None = None  # collect --shard: "k/n", the part of that matrix this run covered
    ratelimit_limit_requests: int | None = None  # x-ratelimit-limit-requests (per minute), as last sent
    ratelimit_limit_tokens: int | None = None  # x-ratelimit-limit-tokens (per minute)
    ratelimit_remaining_requests: int | None = None  # the least x-ratelimit-remaining-requests seen
    ratelimit_remaining_tokens: int | None = None
    ratelimit_reset_s: float | None = None  # the longest x-ratelimit-reset-* seen
    retry_after_s: float | None = None  # the longest Retry-After seen
    line: int = field(default=0, compare=False)  # 1-based CSV line; 0 when built in code
    source: str | None = field(default=None, compare=False)  # the file the row came from

    def __post_init__(self) -> None:
        # Identifiers are stripped (a trailing space would make a second "model" in
        # COUNTIFS); notes stay verbatim. Blank optional text becomes None.
        object.__setattr__(self, "exp_id", self.exp_id.strip())
        object.__setattr__(self, "model", self.model.strip())
        object.__setattr__(self, "gpu", (self.gpu or "").strip() or None)
        object.__setattr__(self, "matrix_id", (self.matrix_id or "").strip() or None)
        object.__setattr__(self, "shard", (self.shard or "").strip() or None)
        object.__setattr__(self, "notes", self.notes if self.notes and self.notes.strip() else None)
        object.__setattr__(self, "override", normalise_override(self.override))
        for column in RESULT_COLUMNS:
            if column != "tps":
                _check_value(column, getattr(self, column))
        if not math.isfinite(self.tps):
            raise InputError(f"total_output_tokens / total_time_s = {self.total_output_tokens} / "
                             f"{_format_cell(self.total_time_s)} is not a finite TPS; "
                             "total_time_s is too small", column="total_time_s")
        counts = [self.ok_requests, self.failed_requests, self.rate_limited_requests]
        counted = sum(count for count in counts if count is not None)
        if counted > self.total_requests:
            raise InputError(f"ok_requests + failed_requests + rate_limited_requests = {counted} "
                             f"exceeds total_requests = {self.total_requests}",
                             column="total_requests")

    @property
    def tps(self) -> float:
        """Output tokens per second, always recomputed from the measured totals."""
        return self.total_output_tokens / self.total_time_s

    def to_csv_dict(self) -> dict[str, str]:
        """Canonical column -> cell text, in RESULT_COLUMNS order."""
        return {column: _format_cell(getattr(self, column)) for column in RESULT_COLUMNS}


@dataclass
class ResultsTable:
    path: str  # the file; for several files, the first
    rows: list[ResultRow]
    warnings: list[str]
    encoding: str = "utf-8"  # as detected ("utf-8", "utf-8-sig", "utf-16", "gb18030")
    delimiter: str = ","
    sources: list[str] = field(default_factory=list)  # every file read, in order

    def to_frame(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame: the results-CSV columns (tps computed), the source file
        and the line of each row."""
        import pandas as pd

        records = []
        for row in self.rows:
            record: dict[str, Any] = {column: getattr(row, column, None) for column in RESULT_COLUMNS}
            record["tps"] = row.total_output_tokens / row.total_time_s
            record["source"] = row.source
            record["line"] = row.line or None
            records.append(record)
        return pd.DataFrame.from_records(records, columns=[*RESULT_COLUMNS, "source", "line"])


def read_results(path: str | Path) -> ResultsTable:
    """Read and validate a whole results CSV; raise InputError at the first problem.

    A file holding shards of `collect --shard` without all of them (shard 1/3 alone) warns of
    each one missing, as `read_results_many` does for several files (`_check_shards`)."""
    table = _read_one(path)
    table.warnings.extend(_check_shards([table]))
    return table


def _read_one(path: str | Path) -> ResultsTable:
    """`read_results` without the check of its shards (read_results_many checks them over all files)."""
    where = str(path)
    text, encoding = _read_text(where)
    delimiter = sniff_delimiter(text)
    records = _parse_records(where, text, delimiter)
    if not records:
        raise InputError.worded("empty_file", path=where, line=1)
    header_line, header_cells = records[0]
    columns, warnings = _map_header(where, header_line, header_cells)
    # Errors name a column as the file's header spells it (Chinese files get Chinese names).
    shown = {canonical: _header_name(header_cells[index]) for index, canonical in columns.items()}
    tps_index = next((index for index, canonical in columns.items() if canonical == "tps"), None)
    if len(records) == 1:
        raise InputError.worded("no_data_rows", path=where, line=header_line)
    if encoding in _LEGACY_ENCODINGS:
        warnings.insert(0, f"{where}: not UTF-8; read as {_LEGACY_ENCODINGS[encoding]}: check its names, "
                           "or save it from the spreadsheet as \"CSV UTF-8\"")
    # "comma": "." between thousands; in a semicolon file "," also before the decimals (1.234,5)
    convention = _number_convention(where, records[1:], columns, shown, semicolon=delimiter == ";")
    decimal_comma, dot_thousands = convention == "comma" and delimiter == ";", convention == "comma"

    rows: list[ResultRow] = []
    first_line_of: dict[str, int] = {}
    for line, cells in records[1:]:
        if len(cells) != len(header_cells):
            raise InputError.worded("field_count", path=where, line=line, expected=len(header_cells),
                                    found=len(cells))
        try:
            values: dict[str, Any] = {canonical: _parse_cell(canonical, cells[index], decimal_comma=decimal_comma,
                                                              dot_thousands=dot_thousands)
                                      for index, canonical in columns.items()}
            given_tps = values.pop("tps", None)
            row = ResultRow(**values, line=line, source=where)
            _check_output_tokens(row)
            check_tps(row)  # after the count: a count no request can return is the problem to name
        except InputError as exc:
            column = shown.get(exc.column or "", exc.column)
            raise exc.located(path=where, line=line, column=column) from exc
        if row.exp_id in first_line_of:
            raise InputError.worded("duplicate_exp_id", path=where, line=line, column=shown["exp_id"],
                                    exp_id=_quote(row.exp_id), first=first_line_of[row.exp_id])
        first_line_of[row.exp_id] = line
        given_tps_text = cells[tps_index].strip() if tps_index is not None else ""
        warnings.extend(_row_warnings(where, row, given_tps, given_tps_text, shown))
        rows.append(row)
    try:
        check_cell_codes(rows)
    except InputError as exc:
        column = shown.get(exc.column or "", exc.column)
        raise exc.located(path=where, line=exc.line, column=column) from None
    return ResultsTable(path=where, rows=rows, warnings=warnings, encoding=encoding, delimiter=delimiter,
                        sources=[where])


def read_results_many(paths: Sequence[str | Path], *, rename_duplicates: bool = False) -> ResultsTable:
    """Read several results CSVs into one table, each row keeping its `source` file.

    An exp_id used in two files is refused (naming both places) unless
    `rename_duplicates`: then a later file's copy becomes "<exp_id>@<file stem>"
    (with a number added if that is taken too), and a warning says so. Shards of
    `collect --shard` (their matrix_id and shard columns) must be of one matrix, and a
    missing one is warned about (`_check_shards`).
    """
    if not paths:
        raise InputError.worded("no_results_given")
    seen_files: dict[str, str] = {}
    tables = []
    for path in paths:
        real = os.path.realpath(path)
        if real in seen_files:
            raise InputError.worded("given_twice", path=str(path), other=seen_files[real])
        seen_files[real] = str(path)
        tables.append(_read_one(path))
    shard_warnings = _check_shards(tables)  # before the exp_ids: shards of two matrices share them
    if len(tables) == 1:
        tables[0].warnings.extend(shard_warnings)
        return tables[0]
    rows: list[ResultRow] = []
    warnings: list[str] = []
    first_place: dict[str, str] = {}
    for table in tables:
        warnings.extend(table.warnings)
        for row in table.rows:
            place = f"{table.path}:{row.line}"
            if row.exp_id in first_place:
                if not rename_duplicates:
                    raise InputError(f"duplicate exp_id {_quote(row.exp_id)}: also in {first_place[row.exp_id]} "
                                     "(pass --rename-duplicates to keep both, renamed)",
                                     path=table.path, line=row.line, column="exp_id")
                new_id = _unused_id(f"{row.exp_id}@{Path(table.path).stem}", first_place)
                warnings.append(f"{place}: exp_id {_quote(row.exp_id)} also in {first_place[row.exp_id]}: "
                                f"renamed {_quote(new_id)}")
                try:
                    row = dataclasses.replace(row, exp_id=new_id)
                except InputError as exc:  # the new name breaks a rule the old one kept (its length)
                    raise InputError(f"renamed {_quote(new_id)} (the exp_id is also in {first_place[row.exp_id]}): "
                                     f"{exc.problem}", path=table.path, line=row.line, column="exp_id") from None
            first_place[row.exp_id] = place
            rows.append(row)
    check_cell_codes(rows)  # the files together: more models, larger levels
    warnings.extend(shard_warnings)
    return ResultsTable(path=tables[0].path, rows=rows, warnings=warnings, encoding=tables[0].encoding,
                        delimiter=tables[0].delimiter, sources=[t.path for t in tables])


def format_shard(index: int, count: int) -> str:
    """The shard column's text for shard `index` of `count` ("2/3"), as `collect --shard` spells it."""
    return f"{index}/{count}"


def shard_of(text: str) -> tuple[int, int] | None:
    """A shard cell as (k, n), or None when it is not k/n with 1 <= k <= n."""
    match = _SHARD.fullmatch(text.strip())
    if match is None:
        return None
    index, count = int(match[1]), int(match[2])
    return (index, count) if 1 <= index <= count else None


def _check_shards(tables: Sequence[ResultsTable]) -> list[str]:
    """Shards read together must be of one matrix, and all there: InputError naming both files for
    a shard of another matrix; a warning naming each missing shard (the data are partial).

    Rows without a shard (another run, an older CSV, a person's rows) are not checked. Complete
    sets of shards of several matrices may be read together."""
    shards: dict[str, dict[tuple[int, int], str]] = {}  # matrix_id -> (k, n) -> the first file holding it
    for table in tables:
        for row in table.rows:
            shard = shard_of(row.shard) if row.shard is not None else None
            if shard is not None and row.matrix_id is not None:
                shards.setdefault(row.matrix_id, {}).setdefault(shard, table.path)
    missing = {matrix: [(k, n) for n in sorted({n for _, n in found}) for k in range(1, n + 1) if (k, n) not in found]
               for matrix, found in shards.items()}
    incomplete = [matrix for matrix in shards if missing[matrix]]
    if len(shards) > 1 and incomplete:
        mine = incomplete[0]
        other = next(matrix for matrix in shards if matrix != mine)
        (k, n), path = next(iter(shards[mine].items()))
        (j, m), other_path = next(iter(shards[other].items()))
        raise InputError(f"holds shard {format_shard(k, n)} of matrix {mine}, but {other_path} holds shard "
                         f"{format_shard(j, m)} of another matrix ({other}): shards filled together must come "
                         "from one matrix (the same models, levels and exp_ids); fill them separately, or "
                         "collect the missing shards of each", path=path)
    warnings: list[str] = []
    for matrix, found in shards.items():
        have = ", ".join(f"{format_shard(k, n)} in {path}"
                         for (k, n), path in sorted(found.items(), key=lambda item: (item[0][1], item[0][0])))
        warnings.extend(f"shard {format_shard(k, n)} of matrix {matrix} is missing (have {have}): these "
                        "results cover part of the matrix only" for k, n in missing[matrix])
    return warnings


def _unused_id(candidate: str, taken: dict[str, str]) -> str:
    if candidate not in taken:
        return candidate
    number = 2
    while f"{candidate}-{number}" in taken:
        number += 1
    return f"{candidate}-{number}"


def check_tps(row: ResultRow) -> None:
    """InputError (column total_time_s) when the row's TPS (finite: ResultRow checks that) is not 0
    and outside MIN_TPS..MAX_TPS, which the workbook cannot compute right."""
    tps = row.tps
    ratio = f"total_output_tokens / total_time_s = {row.total_output_tokens} / {_format_cell(row.total_time_s)}"
    if 0 < tps < MIN_TPS:
        raise InputError(f"{ratio} = {tps:.3g} tok/s, below {MIN_TPS:g} tok/s, the least TPS the workbook computes "
                         "right (its engines take a number so close to 0 for 0): total_time_s is too large; "
                         "is it in seconds?", column="total_time_s")
    if tps > MAX_TPS:
        raise InputError(f"{ratio} = {tps:.3g} tok/s, above {MAX_TPS:g} tok/s, the most the workbook computes "
                         "right (ratios of its TPS lose their digits): total_time_s is too small; is it in "
                         "seconds?", column="total_time_s")


def cell_code_scale(models: int, largest_max_tokens: int, prompt_levels: int, largest_concurrency: int) -> int:
    """One more than the largest workbook cell code of such levels (workbook.layout's cell code):
    (models + 1) x (largest max_tokens + 1) x (prompt levels + 1) x (largest concurrency + 1); it
    must not pass MAX_CELL_CODE."""
    return (models + 1) * (largest_max_tokens + 1) * (prompt_levels + 1) * (largest_concurrency + 1)


def check_cell_codes(rows: Sequence[ResultRow]) -> None:
    """InputError (naming the row that passes it, by its source and line) when the rows' levels
    make a workbook cell code of MAX_CELL_CODE or more, which the workbook would take apart wrongly.

    The scales are the workbook's (workbook.layout): models counted case-blind, one more than
    the largest max_tokens and concurrency, one more than the number of prompt levels.
    """
    models: set[str] = set()
    levels: set[int] = set()
    largest = {"max_tokens": 0, "concurrency": 0}
    for row in rows:
        grew: list[str] = []
        if row.model.casefold() not in models:
            models.add(row.model.casefold())
            grew.append("model")
        if row.prompt_level is not None and row.prompt_level not in levels:
            levels.add(row.prompt_level)
            grew.append("prompt_level")
        for column in largest:
            if getattr(row, column) > largest[column]:
                largest[column] = getattr(row, column)
                grew.append(column)
        size = cell_code_scale(len(models), largest["max_tokens"], len(levels), largest["concurrency"])
        if size > MAX_CELL_CODE:
            column = grew[-1]  # concurrency, else max_tokens, else what else this row added
            raise InputError(
                f"{_format_cell(getattr(row, column))} is too large beside the other rows: the workbook numbers each "
                f"cell with one whole number, at most (models + 1) x (largest max_tokens + 1) x (prompt levels + 1) "
                f"x (largest concurrency + 1) = ({len(models)} + 1) x ({largest['max_tokens']} + 1) x "
                f"({len(levels)} + 1) x ({largest['concurrency']} + 1) = {size:.4g}, and a spreadsheet takes such "
                f"a number apart exactly only below {MAX_CELL_CODE:.0e} ({MAX_CELL_CODE:,}): use smaller levels, "
                "or split the results", path=row.source, line=row.line or None, column=column)


# The collector's note on a row whose requests streamed reasoning, which some APIs do not count
# against max_tokens: such a row may hold more than max_tokens x requests output tokens.
REASONING_NOTE = "reasoning"


def _check_output_tokens(row: ResultRow) -> None:
    """No request returns more than max_tokens tokens: a total above max_tokens x total_requests
    is a miscount (a server's `usage` of 10^12 tokens was seen) and would make any TPS a fiction.
    Rows the collector noted as reasoning are exempt (the collector checked them per chunk)."""
    most = row.max_tokens * row.total_requests
    if row.total_output_tokens > most and f"{REASONING_NOTE}: " not in (row.notes or ""):
        raise InputError(f"{row.total_output_tokens} output tokens exceed max_tokens x total_requests = "
                         f"{row.max_tokens} x {row.total_requests} = {most}, the most the requests can return: "
                         "the count is wrong (a server's usage figures?); remove the row or correct it",
                         column="total_output_tokens")


def write_results(path: str | Path, rows: Iterable[ResultRow]) -> None:
    """Write the canonical header and `rows`, replacing `path` atomically."""
    target = Path(path)
    all_rows = list(rows)
    seen: set[str] = set()
    for row in all_rows:
        if row.exp_id in seen:
            raise InputError(f"duplicate exp_id {_quote(row.exp_id)}", path=str(target),
                             column="exp_id")
        seen.add(row.exp_id)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(RESULT_COLUMNS)
    writer.writerows(list(row.to_csv_dict().values()) for row in all_rows)
    atomic_write_text(target, buffer.getvalue())


def append_result(path: str | Path, row: ResultRow) -> None:
    """Append one row (header first if the file is new or empty), flushed and fsynced."""
    target = Path(path)
    where = str(target)
    text = _read_text(where)[0] if target.exists() else ""
    records = _parse_records(where, text, ",")
    if records:
        header_line, header_cells = records[0]
        header = tuple(_header_name(cell) for cell in header_cells)
        if header != RESULT_COLUMNS:
            raise InputError("cannot append: the header is not scm-xl's canonical header "
                             f"({','.join(RESULT_COLUMNS)})", path=where, line=header_line)
        for line, cells in records[1:]:
            if cells[0].strip() == row.exp_id:
                raise InputError(f"duplicate exp_id {_quote(row.exp_id)}: already on line {line}",
                                 path=where, column="exp_id")
    try:
        # A collector killed mid-line leaves no newline; start a fresh line rather than
        # gluing this row onto the broken one.
        with open(target, "a", encoding="utf-8", newline="") as handle:
            if text and not text.endswith(("\n", "\r")):
                handle.write("\n")
            writer = csv.writer(handle, lineterminator="\n")
            if not records:
                writer.writerow(RESULT_COLUMNS)
            writer.writerow(row.to_csv_dict().values())
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=where) from exc


def _read_text(where: str) -> tuple[str, str]:
    """The file's text and the encoding it was read with (a regular file of at most MAX_RESULTS_BYTES)."""
    data = read_capped(where, MAX_RESULTS_BYTES, "a results CSV")
    _refuse_spreadsheet(where, data[:8])
    encoding = _guess_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        if encoding != "utf-8-sig" or data.startswith(b"\xef\xbb\xbf"):  # a BOM says UTF-8
            line = data.count(b"\n", 0, exc.start) // (2 if encoding.startswith("utf-16") else 1) + 1
            name = "UTF-8" if encoding == "utf-8-sig" else encoding.upper()
            raise InputError.worded("not_valid_text", path=where, line=line, encoding=name) from None
        legacy = _legacy_encoding(data)
        try:
            if legacy is None:
                raise UnicodeDecodeError("utf-8", data, exc.start, exc.end, "no legacy encoding fits")
            text, encoding = data.decode(legacy), legacy
        except UnicodeDecodeError:
            line = data.count(b"\n", 0, exc.start) + 1
            raise InputError.worded("unknown_encoding", path=where, line=line) from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise InputError.worded("nul_bytes", path=where, line=line)
    return text.lstrip("\ufeff"), ("utf-8" if encoding == "utf-8-sig" else encoding)


def refuse_spreadsheet_file(path: str | Path) -> None:
    """InputError when `path` is a workbook (.xlsx/.xls) rather than a CSV, or no regular file
    (opening a FIFO would wait for a writer); cheap (reads 8 bytes)."""
    refuse_non_regular(path)
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return  # reading it later names the problem
    _refuse_spreadsheet(str(path), head)


def _refuse_spreadsheet(where: str, head: bytes) -> None:
    if head.startswith(b"PK\x03\x04"):
        raise InputError.worded("is_workbook", path=where, where=where)
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        raise InputError.worded("is_xls", path=where)


def _guess_encoding(data: bytes) -> str:
    """UTF-16 by its BOM or by the NUL bytes ASCII text has in it; otherwise UTF-8 (BOM optional)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    head = data[:400]
    if len(head) >= 4 and head.count(0) * 3 >= len(head):
        even, odd = head[0::2].count(0), head[1::2].count(0)
        return "utf-16-le" if odd > even else "utf-16-be"
    return "utf-8-sig"


_LEGACY_ENCODINGS: dict[str, str] = {
    "gb18030": "GB18030/GBK (the \"CSV\" of a Chinese Windows)",
    "cp1252": "Windows-1252 (the \"CSV\" of a Western Windows)",
}


def _legacy_encoding(data: bytes) -> str | None:
    """GB18030/GBK or Windows-1252 for a file that is not UTF-8, when the bytes show which; else None.

    Both decode almost any bytes, so the choice is made on evidence. Chinese text is runs of
    GBK characters, among them the 3,755 common hanzi of GB2312's first level (lead byte
    0xB0-0xD7) and its punctuation (0xA1-0xA9); Western text is one or two accented letters
    at a time beside ASCII letters. Read as GBK, such letters become rare characters (level
    two, or GBK extensions) next to Latin letters: "Größe" would be "Gr鲞e". So:

    - Windows-1252 is possible when it decodes and no run of high bytes is longer than 3;
      its evidence is a run of one or two accented letters touching an ASCII letter.
    - GB18030 is possible when it decodes and a run of GBK characters holds a common one
      (not a lone one wedged between ASCII letters); it is suspect when a run holding a rare
      character touches an ASCII letter.

    When only one is possible it is taken; when both are, GB18030 if it is not suspect and
    Windows-1252 has no evidence, Windows-1252 if GB18030 is suspect. Otherwise None: the
    reader asks for UTF-8.
    """
    try:
        data.decode("gb18030")
        runs = _gbk_runs(data)
    except UnicodeDecodeError:
        runs = []
    gb_possible = gb_suspect = False
    for start, end, chars, common in runs:
        touches = (_is_ascii_letter(data, start - 1), _is_ascii_letter(data, end))
        gb_possible = gb_possible or (common > 0 and not (chars == 1 and all(touches)))
        gb_suspect = gb_suspect or (common < chars and any(touches))
    try:
        data.decode("cp1252")
        western_runs = [match.span() for match in re.finditer(rb"[\x80-\xff]+", data)]
    except UnicodeDecodeError:
        western_runs = []
    western_possible = bool(western_runs) and all(end - start <= 3 for start, end in western_runs)
    western_evidence = western_possible and any(
        end - start <= 2 and data[start:end].decode("cp1252").isalpha()
        and (_is_ascii_letter(data, start - 1) or _is_ascii_letter(data, end)) for start, end in western_runs)
    if gb_possible and western_possible:
        if gb_suspect:
            return "cp1252"
        return None if western_evidence else "gb18030"
    if gb_possible:
        return "gb18030"
    return "cp1252" if western_possible else None


def _gbk_runs(data: bytes) -> list[tuple[int, int, int, int]]:
    """(start, end, characters, common ones) of each run of adjacent multi-byte characters of
    GB18030 `data` (which decodes); common: GB2312's level-one hanzi and its punctuation rows."""
    runs: list[tuple[int, int, int, int]] = []
    index, size = 0, len(data)
    while index < size:
        lead = data[index]
        if lead < 0x80:
            index += 1
            continue
        trail = data[index + 1]
        width = 4 if 0x30 <= trail <= 0x39 else 2
        common = int(width == 2 and trail >= 0xA1 and (0xB0 <= lead <= 0xD7 or 0xA1 <= lead <= 0xA9))
        if runs and runs[-1][1] == index:
            start, _, chars, commons = runs[-1]
            runs[-1] = (start, index + width, chars + 1, commons + common)
        else:
            runs.append((index, index + width, 1, common))
        index += width
    return runs


def _is_ascii_letter(data: bytes, index: int) -> bool:
    return 0 <= index < len(data) and chr(data[index]).isascii() and chr(data[index]).isalpha()


def sniff_delimiter(text: str) -> str:
    """The delimiter whose split of the header line names the most known columns."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    best, best_known = ",", -1
    for delimiter in DELIMITERS:
        try:
            cells = next(csv.reader([first], delimiter=delimiter), [])
        except csv.Error:
            continue
        known = sum(1 for cell in cells if _header_name(cell).lower() in _HEADER_ALIASES)
        if known > best_known:
            best, best_known = delimiter, known
    return best


def _parse_records(where: str, text: str, delimiter: str = ",") -> list[tuple[int, list[str]]]:
    """Split into (first physical line, cells) records, leaving out blank lines."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True, delimiter=delimiter)
    records: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for cells in reader:
            records.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError.worded("bad_csv", path=where, line=start, reason=str(exc)) from None
    return [(line, cells) for line, cells in records if any(cell.strip() for cell in cells)]


def _map_header(where: str, line: int, cells: list[str]) -> tuple[dict[int, str], list[str]]:
    """Return {field index: canonical column} and warnings for ignored columns."""
    columns: dict[int, str] = {}
    found_at: dict[str, int] = {}
    warnings: list[str] = []
    for index, cell in enumerate(cells):
        name = _header_name(cell)
        canonical = _HEADER_ALIASES.get(name.lower())
        if canonical is None:
            warnings.append(f"{where}:{line}: ignored column {_quote(name)}")
        elif canonical in found_at:
            first = found_at[canonical]
            raise InputError.worded("duplicate_column", path=where, line=line, column=name,
                                    name=_quote(_header_name(cells[first])), index=first + 1, canonical=canonical)
        else:
            columns[index] = canonical
            found_at[canonical] = index
    missing = [column for column in REQUIRED_COLUMNS if column not in found_at]
    if missing:
        accepted = Joined(tuple(_accepted_headers(column) for column in missing), "alt_sep")
        raise InputError.worded("missing_columns" if len(missing) > 1 else "missing_column", path=where,
                                line=line, names=Joined(tuple(missing)), accepted=accepted)
    return columns, warnings


def _accepted_headers(column: str) -> Joined:
    chinese = [header for header, canonical in CHINESE_HEADERS.items() if canonical == column]
    return Joined((column, *chinese), "or_sep")


def _header_name(cell: str) -> str:
    return cell.strip().lstrip("\ufeff").strip()


_CONVENTIONS = {"point": '"." as the decimal point', "comma": '"," as the decimal point and "." between thousands'}


def _number_style(text: str) -> str | None:
    """How a number cell writes its decimals: "point", "comma", "either" (one group of three
    digits after one separator: 2.000 or 2,000) or None (a whole number, or not a number)."""
    if "." not in text and "," not in text:
        return None
    if _EITHER.fullmatch(text):
        return "either"
    if _DOT_THOUSANDS.fullmatch(text) or _DECIMAL_COMMA.fullmatch(text):
        return "comma"
    if _NUMBER.fullmatch(text) or _THOUSANDS.fullmatch(text):
        return "point"
    return None


def _number_convention(where: str, records: list[tuple[int, list[str]]], columns: dict[int, str],
                       shown: dict[str, str], *, semicolon: bool = True) -> str:
    """"point" or "comma": the convention of a file's numbers, from all of them.

    A number with a decimal point and one with a decimal comma (or "." between thousands) in
    one file are refused, naming both; so is a number that reads two ways (2.000: 2 or 2000)
    when no other number shows the file's convention. Excel writes "." between thousands only
    for cells formatted so, and a file seldom has none with decimals, so this rarely refuses.

    A comma or tab file (not `semicolon`) writes decimals with "." (a comma inside a number is
    refused where the cell is read), so only its dots count, and of the numbers that read two ways
    only those of a whole-number column (tokens, requests, levels: 2.000 is 2 or 2000; 1.234 s is
    a time): a file holding one with no other number showing which is refused.
    """
    first: dict[str, tuple[int, str, str]] = {}  # style -> (line, column, text) of its first number
    for line, cells in records:
        for index, canonical in columns.items():
            if canonical not in NUMERIC_COLUMNS or index >= len(cells):
                continue
            text = cells[index].strip()
            if not semicolon and "," in text:
                continue
            style = _number_style(text)
            if style == "either" and not semicolon and canonical not in INT_COLUMNS:
                continue
            if style is None or style in first:
                continue
            first[style] = (line, shown[canonical], text)
            other = {"point": "comma", "comma": "point"}.get(style)
            if other in first:
                other_line, other_column, other_text = first[other]
                raise InputError(f"{_quote(text)} writes {_CONVENTIONS[style]}, but {_quote(other_text)} "
                                 f"(line {other_line}, {other_column}) writes {_CONVENTIONS[other]}: "
                                 "use one convention in the whole file", path=where, line=line,
                                 column=shown[canonical])
    for style in ("comma", "point"):
        if style in first:
            return style
    if "either" in first:
        line, column, text = first["either"]
        separator = text[-4]
        whole = text.replace(separator, "")
        decimal = _format_cell(float(text.replace(",", ".")))
        raise InputError(f"ambiguous number {_quote(text)}: it is {decimal} with \"{separator}\" as the decimal "
                         f"point, {whole} with \"{separator}\" between thousands, and no other number in the file "
                         f"shows which: write it without a thousands separator ({whole}), or as a decimal with "
                         "other than three digits after the separator", path=where, line=line, column=column)
    return "point"


def _parse_cell(column: str, raw: str, *, decimal_comma: bool = False,
                dot_thousands: bool = False) -> int | float | str | None:
    """A cell's value; `decimal_comma`: numbers are written 1.234,5, `dot_thousands`: "." between
    thousands (12.345.678) without a decimal comma (see _number_convention)."""
    text = raw.strip()
    if not text:
        if column in REQUIRED_COLUMNS:
            raise InputError.worded("blank", column=column)
        return None
    if (decimal_comma or dot_thousands) and column in NUMERIC_COLUMNS:
        if _DOT_THOUSANDS.fullmatch(text) and (decimal_comma or "," not in text):
            text = text.replace(".", "").replace(",", ".")
        elif decimal_comma and _DECIMAL_COMMA.fullmatch(text):
            text = text.replace(",", ".")
    if column in INT_COLUMNS:
        return _parse_int(column, text)
    if column in FLOAT_COLUMNS:
        return _parse_float(column, text)
    return raw  # text: ResultRow strips identifiers and keeps notes verbatim


def _parse_float(column: str, text: str) -> float:
    if not _NUMBER.fullmatch(text):
        if text.lstrip("+-").lower() in _NOT_FINITE:
            raise InputError.worded("not_finite", column=column, text=_quote(text))
        hint: Phrase | str = ""
        if _THOUSANDS.fullmatch(text):
            hint = Phrase("hint_thousands", plain=text.replace(",", ""))
        elif _COMMA_DECIMAL.fullmatch(text):
            hint = Phrase("hint_decimal_comma")
        raise InputError.worded("not_a_number", column=column, text=_quote(text), hint=hint)
    value = float(text)
    if not math.isfinite(value):
        raise InputError.worded("not_finite", column=column, text=_quote(text))
    return value


def _parse_int(column: str, text: str) -> int:
    if _INTEGER.fullmatch(text):
        return int(text)
    value = _parse_float(column, text)
    if not value.is_integer():
        raise InputError.worded("whole_number", column=column, text=_quote(text))
    return int(value)


def _check_value(column: str, value: object) -> None:
    """Range and naming rules shared by the reader and rows built in code."""
    if value is None:
        return
    if isinstance(value, str):
        if column in REQUIRED_COLUMNS and not value.strip():
            raise InputError.worded("blank", column=column)
        if len(value) > MAX_CELL_TEXT:
            raise InputError(f"text of {len(value):,} characters: a spreadsheet cell holds at most "
                             f"{MAX_CELL_TEXT:,}, so it would be cut; shorten it", column=column)
        bad = (_CONTROL if column in _IDENTIFIER_COLUMNS else _ILLEGAL_TEXT).search(value)
        if bad:
            raise InputError(f"control character U+{ord(bad.group()):04X} at character {bad.start() + 1}: "
                             "a spreadsheet cell cannot hold it; remove it", column=column)
        if column in ("model", "gpu"):
            _check_model_name(value, column)
        if column == "shard" and shard_of(value) is None:
            raise InputError(f"{_quote(value)} is not k/n with 1 <= k <= n (the part of a matrix a "
                             "`collect --shard k/n` run covered)", column=column)
        return
    if not isinstance(value, (int, float)):
        return
    if column in INT_COLUMNS and abs(value) > MAX_WHOLE_NUMBER:  # before isfinite: 10**400 overflows a float
        raise InputError(f"{_quote(_format_cell(value))} is larger than {MAX_WHOLE_NUMBER:,} (2^53), the largest "
                         "whole number a spreadsheet cell holds exactly", column=column)
    if not math.isfinite(value):
        raise InputError.worded("not_finite", column=column, text=value)
    if value != 0 and abs(value) < SMALLEST_SPREADSHEET_NUMBER:
        raise InputError(f"{_format_cell(value)} is closer to zero than a spreadsheet can store "
                         "(it would read as 0)", column=column)
    if column in _POSITIVE_COLUMNS and value <= 0:
        raise InputError.worded("positive", column=column, value=_format_cell(value))
    if column in _NON_NEGATIVE_COLUMNS and value < 0:
        raise InputError.worded("non_negative", column=column, value=_format_cell(value))


def _check_model_name(model: str, column: str = "model") -> None:
    """Names are spreadsheet criteria (COUNTIFS, SUMIFS) in the workbook: keep them literal."""
    for char in _CRITERIA_WILDCARDS:
        if char in model:
            raise InputError(f"{column} name {_quote(model)} contains '{char}', which acts as a "
                             f"wildcard in spreadsheet COUNTIFS criteria; rename the {column}",
                             column=column)
    if model[:1] in _CRITERIA_OPERATORS:
        raise InputError(f"{column} name {_quote(model)} starts with '{model[0]}', which acts as "
                         "a comparison operator in spreadsheet COUNTIFS criteria; "
                         f"rename the {column}", column=column)
    if _NUMBER.fullmatch(model.strip()):
        raise InputError(f"{column} name {_quote(model)} is a number; spreadsheets compare it as one, "
                         f"so give the {column} a name with a letter in it", column=column)


def _row_warnings(where: str, row: ResultRow, given_tps: object, given_tps_text: str,
                  shown: dict[str, str]) -> list[str]:
    warnings: list[str] = []
    at = f"{where}:{row.line}"
    slots = row.concurrency * row.requests_per_slot
    if row.total_requests != slots:
        warnings.append(f"{at}: {shown['total_requests']}: {row.total_requests} is not "
                        f"{shown['concurrency']} x {shown['requests_per_slot']} = "
                        f"{row.concurrency} x {row.requests_per_slot} = {slots}")
    if isinstance(given_tps, float):
        difference = abs(given_tps - row.tps)
        if difference > 0.01 and difference > 0.01 * abs(row.tps):
            warnings.append(f"{at}: {shown['tps']}: given {given_tps_text} but "
                            f"{shown['total_output_tokens']}/{shown['total_time_s']} = "
                            f"{row.tps:.2f}; using the recomputed value")
    return warnings


def _format_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))  # 2.0 -> "2"
        return repr(value)  # shortest text that reads back to the same float
    return str(value)


def _quote(value: str) -> str:
    if len(value) > _MAX_QUOTED:
        value = value[:_MAX_QUOTED] + "..."
    return f'"{value}"'
