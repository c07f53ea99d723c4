"""The results CSV: one row per experiment (a load test at one concurrency x max_tokens x model).

`scm-xl collect` writes it (`append_result`, `write_results`); `scm-xl fill` reads it
(`read_results`). Reading validates the whole file and raises `InputError` naming
`path:line: column:` at the first problem. Headers may be the canonical English names
(any case) or the seed article's Chinese ones.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from scm_xl.errors import InputError

REQUIRED_COLUMNS: tuple[str, ...] = (
    "exp_id", "model", "concurrency", "requests_per_slot", "total_requests",
    "max_tokens", "total_time_s", "total_output_tokens",
)
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "tps", "repeat", "ok_requests", "failed_requests", "rate_limited_requests",
    "latency_p50_s", "latency_p95_s", "latency_p99_s", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s",
    "mean_itl_s", "prompt_tokens", "gpu", "override", "notes",
)
RESULT_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS

# The seed article's table headers (its "max_tokens" and "TPS" match the English names).
CHINESE_HEADERS: dict[str, str] = {
    "实验编号": "exp_id", "并发数": "concurrency", "请求数/并发": "requests_per_slot",
    "总请求数": "total_requests", "模型": "model", "总耗时(s)": "total_time_s",
    "总耗时（s）": "total_time_s", "总输出Token": "total_output_tokens",
}
# Header cells are looked up after stripping whitespace and a BOM, lower-cased.
_HEADER_ALIASES: dict[str, str] = {name: name for name in RESULT_COLUMNS} | {
    header.lower(): canonical for header, canonical in CHINESE_HEADERS.items()}

_INT_COLUMNS = frozenset({
    "concurrency", "requests_per_slot", "total_requests", "max_tokens", "total_output_tokens",
    "repeat", "ok_requests", "failed_requests", "rate_limited_requests", "prompt_tokens",
})
_FLOAT_COLUMNS = frozenset({
    "tps", "total_time_s", "latency_p50_s", "latency_p95_s", "latency_p99_s",
    "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "mean_itl_s",
})
_POSITIVE_COLUMNS = frozenset({
    "concurrency", "requests_per_slot", "total_requests", "max_tokens", "total_time_s",
})
_NON_NEGATIVE_COLUMNS = (_INT_COLUMNS | _FLOAT_COLUMNS) - _POSITIVE_COLUMNS

_OVERRIDE_WORDS: dict[str, str] = {
    "include": "include", "in": "include", "1": "include", "yes": "include", "纳入": "include",
    "exclude": "exclude", "ex": "exclude", "0": "exclude", "no": "exclude", "剔除": "exclude",
}

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_COMMA_DECIMAL = re.compile(r"[+-]?\d+,\d+")
_NOT_FINITE = frozenset({"nan", "inf", "infinity"})
# In COUNTIFS/AVERAGEIFS criteria * ? ~ are wildcards and a leading = < > is an operator,
# so such a model name would silently match other rows in the workbook.
_CRITERIA_WILDCARDS = "*?~"
_CRITERIA_OPERATORS = "=<>"
_MAX_QUOTED = 40


def normalise_override(value: str | None) -> str | None:
    """Map an override cell to "include", "exclude" or None (blank)."""
    if value is None or not value.strip():
        return None
    word = _OVERRIDE_WORDS.get(value.strip().lower())
    if word is None:
        raise InputError(f"unrecognised override {_quote(value)}: use include or exclude "
                         f"(also accepted: in/ex, 1/0, yes/no, 纳入/剔除)", column="override")
    return word


@dataclass(frozen=True, kw_only=True)
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
    prompt_tokens: int | None = None
    gpu: str | None = None
    override: str | None = None
    notes: str | None = None
    line: int = field(default=0, compare=False)  # 1-based CSV line; 0 when built in code

    def __post_init__(self) -> None:
        # Identifiers are stripped (a trailing space would make a second "model" in
        # COUNTIFS); notes stay verbatim. Blank optional text becomes None.
        object.__setattr__(self, "exp_id", self.exp_id.strip())
        object.__setattr__(self, "model", self.model.strip())
        object.__setattr__(self, "gpu", (self.gpu or "").strip() or None)
        object.__setattr__(self, "notes", self.notes if self.notes and self.notes.strip() else None)
        object.__setattr__(self, "override", normalise_override(self.override))
        for column in RESULT_COLUMNS:
            if column != "tps":
                _check_value(column, getattr(self, column))
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
    path: str
    rows: list[ResultRow]
    warnings: list[str]


def read_results(path: str | Path) -> ResultsTable:
    """Read and validate a whole results CSV; raise InputError at the first problem."""
    where = str(path)
    records = _parse_records(where, _read_text(where))
    if not records:
        raise InputError("empty file: no header row", path=where, line=1)
    header_line, header_cells = records[0]
    columns, warnings = _map_header(where, header_line, header_cells)
    # Errors name a column as the file's header spells it (Chinese files get Chinese names).
    shown = {canonical: _header_name(header_cells[index]) for index, canonical in columns.items()}
    tps_index = next((index for index, canonical in columns.items() if canonical == "tps"), None)
    if len(records) == 1:
        raise InputError("no data rows", path=where, line=header_line)

    rows: list[ResultRow] = []
    first_line_of: dict[str, int] = {}
    for line, cells in records[1:]:
        if len(cells) != len(header_cells):
            raise InputError(f"expected {len(header_cells)} fields (as in the header) "
                             f"but found {len(cells)}", path=where, line=line)
        try:
            values = {canonical: _parse_cell(canonical, cells[index])
                      for index, canonical in columns.items()}
            given_tps = values.pop("tps", None)
            row = ResultRow(**values, line=line)
        except InputError as exc:
            column = shown.get(exc.column or "", exc.column)
            raise InputError(exc.problem, path=where, line=line, column=column) from exc
        if row.exp_id in first_line_of:
            raise InputError(f"duplicate exp_id {_quote(row.exp_id)} "
                             f"(first used on line {first_line_of[row.exp_id]})",
                             path=where, line=line, column=shown["exp_id"])
        first_line_of[row.exp_id] = line
        given_tps_text = cells[tps_index].strip() if tps_index is not None else ""
        warnings.extend(_row_warnings(where, row, given_tps, given_tps_text, shown))
        rows.append(row)
    return ResultsTable(path=where, rows=rows, warnings=warnings)


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
    try:
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
        fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                         suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=str(target)) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(RESULT_COLUMNS)
            writer.writerows(list(row.to_csv_dict().values()) for row in all_rows)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
    except OSError as exc:
        Path(temp_name).unlink(missing_ok=True)
        raise InputError(f"cannot write file: {exc.strerror}", path=str(target)) from exc


def append_result(path: str | Path, row: ResultRow) -> None:
    """Append one row (header first if the file is new or empty), flushed and fsynced."""
    target = Path(path)
    where = str(target)
    text = _read_text(where) if target.exists() else ""
    records = _parse_records(where, text)
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


def _read_text(where: str) -> str:
    try:
        data = Path(where).read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file not found", path=where) from exc
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=where) from exc
    if b"\0" in data:
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise InputError("not a UTF-8 CSV file (it contains NUL bytes)", path=where, line=line)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError("not a UTF-8 CSV file", path=where, line=line) from None
    return text


def _parse_records(where: str, text: str) -> list[tuple[int, list[str]]]:
    """Split into (first physical line, cells) records, leaving out blank lines."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for cells in reader:
            records.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"bad CSV: {exc}", path=where, line=start) from None
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
            raise InputError(f"duplicate column: {_quote(_header_name(cells[first]))} "
                             f"(column {first + 1}) is also {canonical}",
                             path=where, line=line, column=name)
        else:
            columns[index] = canonical
            found_at[canonical] = index
    missing = [column for column in REQUIRED_COLUMNS if column not in found_at]
    if missing:
        accepted = "; ".join(_accepted_headers(column) for column in missing)
        plural = "s" if len(missing) > 1 else ""
        raise InputError(f"missing required column{plural} {', '.join(missing)} "
                         f"(accepted headers: {accepted})", path=where, line=line)
    return columns, warnings


def _accepted_headers(column: str) -> str:
    chinese = [header for header, canonical in CHINESE_HEADERS.items() if canonical == column]
    return " or ".join([column, *chinese])


def _header_name(cell: str) -> str:
    return cell.strip().lstrip("\ufeff").strip()


def _parse_cell(column: str, raw: str) -> int | float | str | None:
    text = raw.strip()
    if not text:
        if column in REQUIRED_COLUMNS:
            raise InputError("required value is blank", column=column)
        return None
    if column in _INT_COLUMNS:
        return _parse_int(column, text)
    if column in _FLOAT_COLUMNS:
        return _parse_float(column, text)
    return raw  # text: ResultRow strips identifiers and keeps notes verbatim


def _parse_float(column: str, text: str) -> float:
    if not _NUMBER.fullmatch(text):
        if text.lstrip("+-").lower() in _NOT_FINITE:
            raise InputError(f"not a finite number: {_quote(text)}", column=column)
        hint = " (use '.' as the decimal separator)" if _COMMA_DECIMAL.fullmatch(text) else ""
        raise InputError(f"not a number: {_quote(text)}{hint}", column=column)
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"not a finite number: {_quote(text)}", column=column)
    return value


def _parse_int(column: str, text: str) -> int:
    if _INTEGER.fullmatch(text):
        return int(text)
    value = _parse_float(column, text)
    if not value.is_integer():
        raise InputError(f"must be a whole number, got {_quote(text)}", column=column)
    return int(value)


def _check_value(column: str, value: object) -> None:
    """Range and naming rules shared by the reader and rows built in code."""
    if value is None:
        return
    if isinstance(value, str):
        if column in REQUIRED_COLUMNS and not value.strip():
            raise InputError("required value is blank", column=column)
        if column in ("model", "gpu"):
            _check_model_name(value, column)
        return
    if not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise InputError(f"not a finite number: {value}", column=column)
    if column in _POSITIVE_COLUMNS and value <= 0:
        raise InputError(f"must be positive, got {_format_cell(value)}", column=column)
    if column in _NON_NEGATIVE_COLUMNS and value < 0:
        raise InputError(f"must not be negative, got {_format_cell(value)}", column=column)


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
