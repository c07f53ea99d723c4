"""The experiment matrix: its points, their ids, matrix files, shards, the matrix's identity
(`matrix_id`, recorded in every results row beside the shard) and model names.

One home for what `scm-xl plan` writes and `scm-xl collect` reads: the exp_id
format (`experiment_id`), the keys of an `[[experiments]]` table
(`EXPERIMENT_KEYS`), the full-factorial order, and the rule for model names
(`check_model_names`). `plan.py` and `demo.py` use these rather than their own.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from scm_xl.errors import InputError, UsageError
from scm_xl.input_files import read_capped
# The results CSV's rules for a cell (control characters, length, and for model and gpu the workbook's
# rule for names used in COUNTIFS criteria), applied before any traffic rather than after it; and its
# limit on the levels (the workbook's cell codes).
from scm_xl.results import MAX_CELL_CODE, _check_value, cell_code_scale
from scm_xl.rules import MAX_CONCURRENCY, MAX_EXPERIMENT_REQUESTS, MAX_EXPERIMENTS

# The most of a matrix file read (`collect --matrix`) and written (`plan`): a plan of MAX_EXPERIMENTS
# experiments is about 12 MiB (tomllib reads it in some 5 s).
MAX_MATRIX_BYTES = 16 * 1024 * 1024

# Keys of one `[[experiments]]` table, in the order `scm-xl plan` writes them; `prompt_tokens`
# (the experiment's prompt level, MatrixPoint.prompt_level) only in a plan with prompt levels.
EXPERIMENT_KEYS: tuple[str, ...] = ("order", "exp_id", "model", "concurrency", "max_tokens", "prompt_tokens",
                                    "repeat")


@dataclass(frozen=True)
class MatrixPoint:
    """One experiment of the matrix."""

    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    repeat: int
    prompt_level: int | None = None  # the requested prompt length in tokens; None: the one plain prompt

    @property
    def key(self) -> tuple[str | int, ...]:
        """(model, concurrency, max_tokens, repeat), and the prompt level when there is one."""
        return experiment_key(self.model, self.concurrency, self.max_tokens, self.repeat, self.prompt_level)

    def label(self) -> str:
        prompt = "" if self.prompt_level is None else f" prompt={self.prompt_level}"
        return f"{self.exp_id} {self.model} c={self.concurrency} max_tokens={self.max_tokens}{prompt}"


def experiment_key(model: str, concurrency: int, max_tokens: int, repeat: int,
                   prompt_level: int | None) -> tuple[str | int, ...]:
    """What makes an experiment the same one (`--resume` skips a point whose key has a row)."""
    base: tuple[str | int, ...] = (model, concurrency, max_tokens, repeat)
    return base if prompt_level is None else (*base, prompt_level)


def experiment_id(cell: int, repeat: int, *, numbered: bool) -> str:
    """`E007` for cell 7, or `E007-R2` for its second repeat when repeats are numbered."""
    return f"E{cell:03d}-R{repeat}" if numbered else f"E{cell:03d}"


def full_factorial(models: Sequence[str], concurrency: Sequence[int], max_tokens: Sequence[int],
                   repeats: int, prompt_levels: Sequence[int] = ()) -> list[MatrixPoint]:
    """Models, then concurrency, then max_tokens, then prompt levels (when any), then repeats;
    cells numbered in that order (without prompt levels, as before they existed)."""
    points: list[MatrixPoint] = []
    cell = 0
    prompts: Sequence[int | None] = tuple(prompt_levels) or (None,)
    for model in models:
        for level in concurrency:
            for length in max_tokens:
                for prompt in prompts:
                    cell += 1
                    for repeat in range(1, repeats + 1):
                        points.append(MatrixPoint(experiment_id(cell, repeat, numbered=repeats > 1), model, level,
                                                  length, repeat, prompt))
    return points


def check_model_names(models: Iterable[str]) -> None:
    """Refuse names the workbook would refuse (wildcards, a leading operator, a number) and two
    names that differ only in case (spreadsheet criteria would merge them), before any traffic."""
    seen: dict[str, str] = {}
    for model in models:
        check_cell("model", model)
        folded = model.strip().casefold()
        if folded in seen and seen[folded] != model:
            raise UsageError(f"model names {seen[folded]!r} and {model!r} differ only in case; spreadsheets "
                             "treat them as one model: spell them the same")
        seen.setdefault(folded, model)


def check_cell(column: str, value: str) -> None:
    """UsageError, before any traffic, for text the results CSV's `column` would refuse when the
    first row is written (a control character, say): a name given on the command line."""
    try:
        _check_value(column, value.strip())
    except InputError as exc:
        problem = exc.problem
        if not problem.startswith(f"{column} name"):
            shown = value if len(value) <= 40 else value[:40] + "..."
            problem = f"{column} name {shown!r}: {problem}"
        raise UsageError(problem) from None


def check_matrix_size(*, models: int, concurrency: Sequence[int], max_tokens: Sequence[int], prompt_levels: int,
                      requests_per_slot: int, warmup: int = 0, experiments: int) -> None:
    """UsageError, before any traffic and before any file, for a matrix beyond what scm-xl runs
    (scm_xl.rules: MAX_CONCURRENCY, MAX_EXPERIMENT_REQUESTS, MAX_EXPERIMENTS), or whose levels make
    workbook cell codes the results reader would refuse (results.MAX_CELL_CODE, `check_cell_codes`).

    `models` and `prompt_levels` count distinct ones (0 levels: the one plain prompt); `experiments`
    the whole matrix, before any shard."""
    largest = max(concurrency)
    if largest > MAX_CONCURRENCY:
        raise UsageError(f"concurrency {largest:,} is above {MAX_CONCURRENCY:,}, the most scm-xl runs at once "
                         "(each slot holds its own connection, and a client reaches a server through at most "
                         "65,535 ports)")
    requests = largest * requests_per_slot + warmup
    if requests > MAX_EXPERIMENT_REQUESTS:
        warm = f" and {warmup:,} warm-up requests" if warmup else ""
        raise UsageError(f"an experiment at concurrency {largest:,} with {requests_per_slot:,} requests per slot"
                         f"{warm} sends {requests:,} requests, above {MAX_EXPERIMENT_REQUESTS:,}, the most scm-xl "
                         "sends in one experiment (it holds each in memory): fewer requests per slot")
    if experiments > MAX_EXPERIMENTS:
        raise UsageError(f"the matrix holds {experiments:,} experiments, above {MAX_EXPERIMENTS:,}, the most scm-xl "
                         "runs in one (as many rows as one workbook holds): fewer levels or repeats")
    scale = cell_code_scale(models, max(max_tokens), prompt_levels, largest)
    if scale > MAX_CELL_CODE:
        raise UsageError(f"the levels are too large together: the workbook numbers each cell with one whole number, "
                         f"at most (models + 1) x (largest max_tokens + 1) x (prompt levels + 1) x (largest "
                         f"concurrency + 1) = ({models} + 1) x ({max(max_tokens):,} + 1) x ({prompt_levels} + 1) x "
                         f"({largest:,} + 1) = {scale:.4g}, and a spreadsheet takes such a number apart exactly only "
                         f"below {MAX_CELL_CODE:.0e} ({MAX_CELL_CODE:,}), so fill would refuse the results: use "
                         "smaller levels")


def matrix_id(points: Sequence[MatrixPoint]) -> str:
    """A short hash of the whole matrix (every experiment's exp_id and levels, in run order, before
    any shard): each results row records it, so that CSVs filled together can be told to be
    shards of one matrix or not (results.read_results_many)."""
    text = json.dumps([[p.exp_id, p.model, p.concurrency, p.max_tokens, p.repeat, p.prompt_level] for p in points],
                      separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def empty_shard(points: Sequence[MatrixPoint], index: int, count: int) -> str | None:
    """The message for a shard of `points` that holds no experiment (nothing would be measured),
    else None."""
    if shard_points(points, index, count):
        return None
    size = len(points)
    return (f"--shard {index}/{count} has no experiments: the matrix has {size}, so only shards 1..{size} "
            f"of {count} hold any; split it into at most {size} shards")


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` (1 <= i <= n) as (i, n)."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or n < 1 or not 1 <= i <= n:
        raise UsageError(f"--shard must be i/n with 1 <= i <= n (e.g. 2/3), got {text!r}")
    return i, n


def shard_points(points: Sequence[MatrixPoint], index: int, count: int) -> list[MatrixPoint]:
    """Every `count`-th point starting at the `index`-th (1-based): shards 1/n..n/n of one plan
    cover it exactly once, and their exp_ids stay the plan's, so their CSVs fill together."""
    return list(points[index - 1::count])


# -- matrix files ---------------------------------------------------------------------

# Matrix-file key -> accepted TOML type(s); the values become CollectConfig fields.
_MATRIX_KEYS: dict[str, type | tuple[type, ...]] = {
    "base_url": str, "models": list, "model": str, "concurrency": list, "max_tokens": list,
    "repeats": int, "requests_per_slot": int, "warmup": int, "prompt": str, "ignore_eos": bool,
    "min_tokens": int, "temperature": (int, float), "timeout_s": (int, float),
    "request_timeout_s": (int, float), "max_retries": int, "max_retry_after_s": (int, float), "gpu": str,
    "prompt_tokens": list, "shared_prefix": int, "prompts": str, "prompt_levels": int, "prompt_seed": int,
}
# Matrix-file key -> CollectConfig field, where the two differ.
_MATRIX_FIELDS: dict[str, str] = {"prompts": "prompts_path"}


def load_matrix_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML matrix file into CollectConfig field values (InputError on a bad one)."""
    where = str(path)
    raw = read_capped(where, MAX_MATRIX_BYTES, "a matrix file")  # a device or FIFO is refused unread
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", path=where) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"bad TOML: {exc}", path=where) from None
    if isinstance(data.get("matrix"), dict):
        data = data["matrix"]
    data = dict(data)
    data.pop("plan", None)  # written by `scm-xl plan` for people: information only
    values: dict[str, Any] = {}
    if "experiments" in data:
        values["experiments"] = _experiments(data.pop("experiments"), where)
    for key, value in data.items():
        expected = _MATRIX_KEYS.get(key)
        if expected is None:
            raise InputError(f"unknown key {key!r} (known: {', '.join(sorted(_MATRIX_KEYS))})", path=where)
        if isinstance(value, bool) and expected is not bool or not isinstance(value, expected):
            raise InputError(f"{key!r} has the wrong type ({type(value).__name__})", path=where)
        items: list[Any] = value if isinstance(value, list) else []
        if key in ("concurrency", "max_tokens", "prompt_tokens") and not all(
                isinstance(v, int) and not isinstance(v, bool) for v in items):
            raise InputError(f"{key!r} must be a list of integers", path=where)
        if key == "concurrency" and any(v > MAX_CONCURRENCY for v in items):
            raise InputError(f"'concurrency' {max(items):,} is above {MAX_CONCURRENCY:,}, the most scm-xl runs at "
                             "once", path=where)
        if key == "models" and not all(isinstance(v, str) for v in items):
            raise InputError("'models' must be a list of strings", path=where)
        if key == "model":
            key, value = "models", [value]
        if key == "prompts":  # relative to the matrix file, as a person writing it means
            value = str(Path(path).parent / value)
        values[_MATRIX_FIELDS.get(key, key)] = tuple(value) if isinstance(value, list) else value
    return values


def _experiments(tables: Any, where: str) -> tuple[MatrixPoint, ...]:
    """`[[experiments]]` tables (from `scm-xl plan`): run exactly these, in `order`."""
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise InputError("'experiments' must be one or more [[experiments]] tables", path=where)
    points: list[tuple[int, MatrixPoint]] = []
    seen: set[str] = set()
    for i, table in enumerate(tables, start=1):
        unknown = set(table) - set(EXPERIMENT_KEYS)
        if unknown:
            raise InputError(f"experiment {i}: unknown key(s) {', '.join(sorted(unknown))}", path=where)
        model, concurrency, length = table.get("model"), table.get("concurrency"), table.get("max_tokens")
        repeat, order = table.get("repeat", 1), table.get("order", i)
        prompt = table.get("prompt_tokens")
        if not isinstance(model, str) or not model.strip():
            raise InputError(f"experiment {i}: 'model' must be a name", path=where)
        for name, value in (("concurrency", concurrency), ("max_tokens", length), ("repeat", repeat),
                            ("order", order), ("prompt_tokens", 1 if prompt is None else prompt)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"experiment {i}: {name!r} must be a positive integer", path=where)
        if concurrency > MAX_CONCURRENCY:
            raise InputError(f"experiment {i}: 'concurrency' {concurrency:,} is above {MAX_CONCURRENCY:,}, the most "
                             "scm-xl runs at once", path=where)
        if (prompt is None) != ("prompt_tokens" not in tables[0]):
            raise InputError(f"experiment {i}: 'prompt_tokens' must be given in every experiment or in none",
                             path=where)
        exp_id = table.get("exp_id", experiment_id(i, 1, numbered=False))
        if not isinstance(exp_id, str) or not exp_id or exp_id in seen:
            raise InputError(f"experiment {i}: 'exp_id' must be a unique name", path=where)
        try:
            _check_value("exp_id", exp_id.strip())
        except InputError as exc:
            raise InputError(f"experiment {i}: 'exp_id': {exc.problem}", path=where) from None
        seen.add(exp_id)
        points.append((order, MatrixPoint(exp_id, model, concurrency, length, repeat, prompt)))
    return tuple(point for _, point in sorted(points, key=lambda item: item[0]))
