"""Per-request records and the two CSVs: what is measured per request, how it is written,
and how an earlier run's files are checked and trimmed before `--resume` continues them.

Write order per experiment: its request rows to requests.csv, then its one results row
(the commit point) through `scm_xl.results.append_result`; each flushed and fsynced.

`--resume` runs again an experiment in which every request failed (its request rows are
dropped: no measurement) or more than RERUN_FAILED_SHARE of them (its request rows stay,
renamed `<exp_id>~superseded<n>`); the new results row replaces the old one.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from scm_xl.collect.config import CollectConfig
from scm_xl.collect.matrix import MatrixPoint, experiment_key
from scm_xl.collect.ratelimit import COLUMNS as RATELIMIT_COLUMNS
from scm_xl.errors import InputError, UsageError
from scm_xl.results import RESULT_COLUMNS, ResultRow, read_results

if TYPE_CHECKING:
    import pandas as pd

# A stream chunk can carry several tokens (speculative decoding, a server's stream interval), but
# not more than this: a usage.completion_tokens above this many per content chunk contradicts the
# stream (see usage_problem).
USAGE_TOKENS_PER_CHUNK = 32
# --resume runs an experiment again when more than this share of its requests failed (a server
# that died mid-run): the workbook would leave its row out as a fault anyway.
RERUN_FAILED_SHARE = 0.10
# An experiment run again on --resume keeps its earlier request rows, their exp_id renamed
# "<exp_id>~superseded<n>", so that the exp_id itself names only the rows of its results row.
SUPERSEDED_MARK = "~superseded"
# Results columns an older scm-xl did not write, which --resume adds (blank) to its CSV.
RESUME_ADDS: tuple[str, ...] = ("matrix_id", "shard", *RATELIMIT_COLUMNS)

REQUEST_COLUMNS: tuple[str, ...] = (
    "exp_id", "model", "concurrency", "max_tokens", "prompt_level", "repeat", "slot", "seq", "warmup",
    "scheduled_s", "sent_s", "ttft_s", "latency_s", "mean_itl_s", "max_itl_s",
    "prompt_tokens", "completion_tokens", "tokens_counted", "chunks", "finish_reason",
    "status", "http_status", "error_class", "error", "retries", "retry_wait_s",
    "prompt_nonce", "prompt_line", "prompt_seed",
)


@dataclass(slots=True)
class RequestRecord:
    """One request as measured (absolute times on time.perf_counter())."""

    point: MatrixPoint
    slot: int
    seq: int
    warmup: bool
    scheduled_at: float
    sent_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    ended_at: float | None = None
    chunks: int = 0
    reasoning_chunks: int = 0  # of the chunks, those with reasoning_content only
    max_itl_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    tokens_counted: bool = False
    finish_reason: str | None = None
    http_status: int | None = None
    succeeded: bool = False
    error_class: str = ""
    error: str = ""
    retries: int = 0
    rate_limited_hits: int = 0
    retry_wait_s: float = 0.0
    prompt_nonce: str = ""  # the number the prompt started with (prompt levels only)
    prompt_line: int | None = None  # the --prompts file's line the prompt came from
    prompt_seed: int | None = None  # the seed of the --prompts order
    ratelimit: dict[str, float] = field(default_factory=dict)  # the rate-limit headers of its responses (ratelimit.py)

    @property
    def status(self) -> str:
        if self.rate_limited_hits:
            return "rate_limited"
        return "ok" if self.succeeded else "failed"

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.scheduled_at

    @property
    def latency_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.scheduled_at

    @property
    def itl_span_s(self) -> float:
        if self.first_token_at is None or self.last_token_at is None:
            return 0.0
        return self.last_token_at - self.first_token_at

    @property
    def mean_itl_s(self) -> float | None:
        return self.itl_span_s / (self.chunks - 1) if self.chunks > 1 else None

    def csv_row(self, origin: float) -> list[str]:
        point = self.point
        return [
            point.exp_id, point.model, str(point.concurrency), str(point.max_tokens), _int(point.prompt_level),
            str(point.repeat), str(self.slot), str(self.seq), _bool(self.warmup),
            _seconds(self.scheduled_at - origin), _seconds(None if self.sent_at is None else self.sent_at - origin),
            _seconds(self.ttft_s), _seconds(self.latency_s), _seconds(self.mean_itl_s), _seconds(self.max_itl_s),
            "" if self.prompt_tokens is None else str(self.prompt_tokens), str(self.completion_tokens),
            _bool(self.tokens_counted), str(self.chunks), self.finish_reason or "", self.status,
            "" if self.http_status is None else str(self.http_status), self.error_class, self.error,
            str(self.retries), _seconds(self.retry_wait_s),
            self.prompt_nonce, _int(self.prompt_line), _int(self.prompt_seed),
        ]


def usage_problem(completion_tokens: int, content_chunks: int, reasoning_chunks: int, max_tokens: int) -> str | None:
    """Why a server's usage.completion_tokens cannot be true of the stream it came with, or None.

    Impossible: a negative count; more than USAGE_TOKENS_PER_CHUNK per chunk (a stream without
    chunks may still count a few tokens, an end-of-sequence say); more than max_tokens when the
    stream had no reasoning chunks (some reasoning APIs cap only the answer with max_tokens)."""
    chunks = content_chunks + reasoning_chunks
    seen = f"the stream had {chunks} content chunk(s), max_tokens {max_tokens}"
    if completion_tokens < 0:
        return f"usage.completion_tokens {completion_tokens} is negative ({seen})"
    if completion_tokens > USAGE_TOKENS_PER_CHUNK * max(chunks, 1):
        return (f"usage.completion_tokens {completion_tokens} is more than {USAGE_TOKENS_PER_CHUNK} per chunk "
                f"({seen})")
    if completion_tokens > max_tokens and not reasoning_chunks:
        return f"usage.completion_tokens {completion_tokens} is more than max_tokens ({seen})"
    return None


def _int(value: int | None) -> str:
    return "" if value is None else str(value)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"




def append_requests(path: Path, records: Iterable[RequestRecord], origin: float) -> None:
    """Append per-request rows (header first if new), flushed and fsynced."""
    exists = path.exists() and path.stat().st_size > 0
    if exists:
        _check_requests_header(path)
    try:
        with open(path, "a", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            if not exists:
                writer.writerow(REQUEST_COLUMNS)
            writer.writerows(record.csv_row(origin) for record in records)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=str(path)) from None


def read_requests(path: str | Path) -> list[dict[str, str]]:
    """The rows of a requests CSV as dicts (column -> text)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def requests_frame(path: str | Path) -> pd.DataFrame:
    """requests.csv as a pandas DataFrame, one row per request; a column whose every filled cell is
    a number is numeric."""
    import pandas as pd

    frame = pd.DataFrame.from_records(read_requests(path))
    for column in frame.columns:
        numbers = pd.to_numeric(frame[column], errors="coerce")
        if int(numbers.notna().sum()) == int((frame[column] != "").sum()):
            frame[column] = numbers
    return frame


def _check_requests_header(path: Path) -> None:
    with open(path, encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), [])
    if tuple(header) != REQUEST_COLUMNS:
        older = _older_version("cannot append", "requests", header, REQUEST_COLUMNS)
        raise InputError(older or "cannot append: not a requests CSV written by this version of scm-xl",
                         path=str(path), line=1)


def _older_version(action: str, kind: str, header: Iterable[str], columns: tuple[str, ...],
                   addable: tuple[str, ...] = ()) -> str | None:
    """The message for a CSV another version of scm-xl wrote (its header: only our columns, in our
    order, some missing that are not `addable`), or None for a header that is not scm-xl's or
    lacks only addable columns."""
    cells = [cell.strip() for cell in header]
    if len(cells) < 2 or cells[:2] != list(columns[:2]) or any(cell not in columns for cell in cells) \
            or cells != sorted(cells, key=columns.index):
        return None
    missing = [column for column in columns if column not in cells and column not in addable]
    if not missing:
        return None
    return (f"{action}: this {kind} CSV was written by an older scm-xl (it has no {', '.join(missing)} "
            f"column{'s' if len(missing) > 1 else ''}): finish it with that version, or start a new file "
            "(another --output, or --force to replace it)")


def _prune_requests(path: Path, keep_exp_ids: set[str], renames: dict[str, str]) -> None:
    """Drop request rows of experiments that have no results row (an interrupted write, a
    half-written last line, or an all-failed experiment to run again); rename those of an
    experiment run again that had successes (`renames`: exp_id -> superseded name). Rows an
    earlier resume renamed so stay."""
    if not path.exists() or path.stat().st_size == 0:
        return
    _check_requests_header(path)
    rows = read_requests(path)
    kept = [row for row in rows if None not in row.values() and None not in row
            and (row.get("exp_id") in keep_exp_ids or row.get("exp_id") in renames
                 or SUPERSEDED_MARK in (row.get("exp_id") or ""))]
    if len(kept) == len(rows) and not renames:
        return
    for row in kept:
        row["exp_id"] = renames.get(row["exp_id"], row["exp_id"])
    _replace_csv(path, REQUEST_COLUMNS, [[row[column] for column in REQUEST_COLUMNS] for row in kept])


def _superseded_names(path: Path, exp_ids: Iterable[str]) -> dict[str, str]:
    """exp_id -> "<exp_id>~superseded<n>", the first n whose name the requests CSV does not use yet."""
    exp_ids = list(exp_ids)
    used: set[str] = set()
    if exp_ids and path.exists() and path.stat().st_size > 0:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            used = {record[0] for record in csv.reader(handle) if record}
    names: dict[str, str] = {}
    for exp_id in exp_ids:
        number = 1
        while f"{exp_id}{SUPERSEDED_MARK}{number}" in used:
            number += 1
        names[exp_id] = f"{exp_id}{SUPERSEDED_MARK}{number}"
    return names


def _replace_csv(path: Path, header: Iterable[str], rows: Iterable[list[str]]) -> None:
    """Write a CSV beside `path` and rename it over `path` (never a half-written file)."""
    try:
        mode = path.stat().st_mode & 0o777
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow(list(header))
                writer.writerows(rows)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, mode)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=str(path)) from None


def all_failed(row: ResultRow) -> bool:
    """Whether no request of the experiment succeeded: such a row is no measurement; the exit
    code says so and `--resume` runs the experiment again."""
    if row.ok_requests is None or row.ok_requests > 0:
        return False
    return row.failed_requests == row.total_requests or row.total_output_tokens == 0


def mostly_failed(row: ResultRow) -> bool:
    """Whether more than RERUN_FAILED_SHARE of the experiment's requests failed, though some
    succeeded: `--resume` runs it again (and says so), keeping the earlier request rows."""
    if all_failed(row) or not row.failed_requests or not row.total_requests:
        return False
    return row.failed_requests > RERUN_FAILED_SHARE * row.total_requests


@dataclass
class OutputPlan:
    """What a run will do to its output files, decided before any traffic; `apply` does it."""

    todo: list[MatrixPoint]
    skipped: list[MatrixPoint] = dataclasses.field(default_factory=list)
    rerun: list[str] = dataclasses.field(default_factory=list)  # exp_ids of all-failed rows run again
    # exp_ids of rows with more than RERUN_FAILED_SHARE failed, run again -> (failed, total)
    rerun_failing: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    superseded: dict[str, str] = dataclasses.field(default_factory=dict)  # their request rows' new exp_id
    dropped_line: int | None = None  # a half-written last line of the results CSV
    _rewrite: tuple[list[str], list[list[str]]] | None = None  # the results CSV to keep (resume)
    _keep: set[str] | None = None  # exp_ids whose request rows are kept (resume)

    def apply(self, config: CollectConfig) -> None:
        results, requests = config.results_path, config.requests_csv
        if config.overwrite or (config.resume and self._keep is None):
            results.unlink(missing_ok=True)
            requests.unlink(missing_ok=True)  # request rows without any results row are orphans
            return
        if self._rewrite is not None:
            _replace_csv(results, *self._rewrite)
        if self._keep is not None:
            _prune_requests(requests, self._keep, self.superseded)


def check_outputs(config: CollectConfig, points: list[MatrixPoint]) -> OutputPlan:
    """Check the output files before any traffic (folders, names, an earlier run's files) and
    decide which points run; writes nothing (see OutputPlan.apply)."""
    results, requests = config.results_path, config.requests_csv
    for path, option in ((results, "--output"), (requests, "--requests-out")):
        folder = path.parent
        if not folder.is_dir():
            raise UsageError(f"{option} {path}: the folder {folder} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {path}: the folder {folder} is not writable")
        if path.is_dir():
            raise UsageError(f"{option} {path} is a folder, not a file")
    if results.resolve() == requests.resolve():
        raise UsageError(f"--requests-out and --output are the same file ({results}): give them different names")
    if config.overwrite:
        return OutputPlan(todo=points)
    results_exist = results.exists() and results.stat().st_size > 0
    if not config.resume:
        for path in (results, requests):
            if path.exists() and path.stat().st_size > 0:
                raise UsageError(f"{path} already exists: pass --resume to continue it or --force to replace it")
        return OutputPlan(todo=points)
    if not results_exist:
        if requests.exists() and requests.stat().st_size > 0:
            _check_requests_header(requests)
        return OutputPlan(todo=points)
    plan = OutputPlan(todo=[])
    text, plan.dropped_line = _complete_lines(results)
    rows = _read_scm_results(results, text)
    if requests.exists() and requests.stat().st_size > 0:
        _check_requests_header(requests)
    plan.rerun = [row.exp_id for row in rows if all_failed(row)]
    plan.rerun_failing = {row.exp_id: (row.failed_requests or 0, row.total_requests)
                          for row in rows if mostly_failed(row)}
    plan.superseded = _superseded_names(requests, plan.rerun_failing)
    again = set(plan.rerun) | set(plan.rerun_failing)
    records = list(csv.reader(io.StringIO(text)))
    header = [cell.strip().lstrip("\ufeff") for cell in records[0]]
    if again or plan.dropped_line is not None or tuple(header) != RESULT_COLUMNS:
        # canonical header: an older CSV gains the RESUME_ADDS columns, blank in its rows
        plan._rewrite = (list(RESULT_COLUMNS), [
            [dict(zip(header, record)).get(column, "") for column in RESULT_COLUMNS]
            for record in records[1:] if record and record[0].strip() not in again])
        rows = [row for row in rows if row.exp_id not in again]
    done_keys = {experiment_key(row.model, row.concurrency, row.max_tokens, row.repeat or 1, row.prompt_level)
                 for row in rows}
    taken = {row.exp_id for row in rows}
    plan._keep = set(taken)
    for point in points:
        if point.key in done_keys:
            plan.skipped.append(point)
            continue
        exp_id = point.exp_id
        suffix = 2
        while exp_id in taken:  # the matrix changed since the first run
            exp_id = f"{point.exp_id}-{suffix}"
            suffix += 1
        taken.add(exp_id)
        plan.todo.append(dataclasses.replace(point, exp_id=exp_id))
    return plan


def _complete_lines(path: Path) -> tuple[str, int | None]:
    """The results CSV up to its last complete line, and the number of a half-written last line
    (a collector killed while appending leaves one without its newline)."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet re-saving it adds a BOM; the rows appended stay UTF-8
    except UnicodeDecodeError:
        raise InputError("cannot resume: not a results CSV written by scm-xl (not UTF-8)", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=str(path)) from None
    if text.endswith(("\n", "\r")) or "\n" not in text:
        return text, None
    return text[:text.rindex("\n") + 1], text.count("\n") + 1


def _read_scm_results(path: Path, text: str) -> list[ResultRow]:
    """The rows of a results CSV that scm-xl wrote (canonical header), else InputError."""
    header = tuple(cell.strip() for cell in next(csv.reader(text.splitlines()[:1]), []))
    older = _older_version("cannot resume", "results", header, RESULT_COLUMNS, addable=RESUME_ADDS)
    if older is not None:
        raise InputError(older, path=str(path), line=1)
    absent = set(RESULT_COLUMNS) - set(header)
    if list(header) != [c for c in RESULT_COLUMNS if c not in absent] or not absent <= set(RESUME_ADDS):
        raise InputError("cannot resume: not a results CSV written by scm-xl (its header is not "
                         f"{','.join(RESULT_COLUMNS[:4])},...)", path=str(path), line=1)
    if text.count("\n") <= 1:
        return []  # the header alone
    fd, temp = tempfile.mkstemp(prefix=".scm-xl-resume.", suffix=".csv")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        table = read_results(temp)
    except InputError as exc:
        raise InputError(f"cannot resume: {exc.problem}", path=str(path), line=exc.line, column=exc.column) from None
    finally:
        Path(temp).unlink(missing_ok=True)
    return table.rows
