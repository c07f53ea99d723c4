"""Designed experiments: which (model, concurrency, max_tokens[, prompt level]) cells to measure, how often,
in what order.

Designs (`make_plan(design=...)`):

    ofat        one factor at a time, the article's design: every concurrency at the
                base model and base max_tokens, every other max_tokens at the base
                concurrency, every other prompt level (if any) at the base point, every
                other model at the base point. Exactly identifies the chain (base: first
                model, max_tokens 50 if listed else the smallest, the lowest concurrency,
                the shortest prompt level).
    full        the full factorial models x concurrency x max_tokens (x prompt levels).
    orthogonal  the smallest orthogonal array over the factors with two or more levels:
                the full factorial when there are only two such factors (for two
                factors nothing smaller keeps every pair of levels), else the Latin-square
                array L(q^2) (L9, L16, L25, ...) of the smallest prime power q at least
                the largest level count, built over GF(q) (columns b, a, a + b). A factor
                with fewer than q levels takes symbol s as level s mod n; its level pairs
                then appear in proportional rather than equal frequencies, which keeps
                the main effects orthogonal. Whichever of the two has fewer runs wins.

Every cell is repeated `repeats` times. The run order is randomised in blocks: each
repeat is one block holding every cell once (a cell a collapsed array lists twice:
twice, numbered as further repeats, so (model, concurrency, max_tokens, prompt level,
repeat) stays unique), shuffled with `random.Random(seed)`, so
slow drift of the endpoint neither lines up with a factor nor with a repeat. Without a
seed one is drawn and recorded in the plan, so every plan can be regenerated.

The matrix file (`Plan.to_toml`, read back with tomllib) runs with
`scm-xl collect --matrix FILE`:

    # comment lines: design, counts, estimate
    models = ["m1", "m2"]          # the level sets (the collector's own keys)
    concurrency = [1, 2, 4, 8]
    max_tokens = [50, 100, 200]
    prompt_tokens = [128, 1024]     # only with prompt levels (`scm-xl plan --prompt-tokens`)
    requests_per_slot = 10

    [plan]                          # what was planned (informational)
    design = "orthogonal"           # ofat | full | orthogonal
    array = "L16"                   # or "full factorial 4x3", "one factor at a time"
    seed = 42
    repeats = 3
    cells = 16
    experiments = 48
    total_requests = 2160
    max_output_tokens = 216000
    assumed_tps = 100.0
    estimated_seconds = 2160.0

    [[experiments]]                 # one table per experiment, in run order
    order = 1                       # 1-based position in the run order
    exp_id = "E007-R1"              # E<cell>-R<repeat> ("E007" when repeats = 1)
    model = "m1"
    concurrency = 4
    max_tokens = 100
    prompt_tokens = 128             # the prompt level, only with prompt levels
    repeat = 1

The collector runs `[[experiments]]` exactly, in `order`, instead of its own full
factorial; cells are numbered in models, concurrency, max_tokens, prompt level order,
as the collector numbers its own matrix, so a full plan's exp_ids match its own.
Prompt levels are a factor like max_tokens: synthetic prompts of that many tokens as the
server counts them (`scm-xl collect --prompt-tokens`).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from scm_xl.collect.matrix import (
    EXPERIMENT_KEYS, MAX_MATRIX_BYTES, check_matrix_size, check_model_names, experiment_id,
)
from scm_xl.errors import InputError, UsageError
from scm_xl.input_files import size_text

DESIGNS: tuple[str, ...] = ("ofat", "full", "orthogonal")
DEFAULT_TPS = 100.0
PREFERRED_BASE_MAX_TOKENS = 50  # as model.PREFERRED_BASE_MAX_TOKENS
_MAX_FIELD_ORDER = 64  # largest GF(q) the orthogonal arrays use; beyond it: full factorial

# (model, concurrency, max_tokens), or (model, concurrency, max_tokens, prompt_level) in a plan
# with prompt levels
DesignPoint = tuple[Any, ...]


@dataclass(frozen=True)
class Experiment:
    order: int
    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    repeat: int
    cell: int  # 1-based index into Plan.cells
    prompt_level: int | None = None


@dataclass(frozen=True)
class Plan:
    design: str
    array: str
    models: tuple[str, ...]
    concurrency: tuple[int, ...]
    max_tokens: tuple[int, ...]
    repeats: int
    requests_per_slot: int
    seed: int
    cells: tuple[DesignPoint, ...]  # distinct cells, in models, concurrency, max_tokens (, prompt level) order
    runs_per_repeat: tuple[int, ...]  # per cell: runs in each repeat block (2 where an array doubles it)
    experiments: tuple[Experiment, ...]  # run order
    prompt_tokens: tuple[int, ...] = ()  # prompt levels; () without

    @property
    def runs_per_block(self) -> int:
        return sum(self.runs_per_repeat)

    @property
    def total_requests(self) -> int:
        return sum(e.concurrency * self.requests_per_slot for e in self.experiments)

    @property
    def max_output_tokens(self) -> int:
        """Output tokens if every response runs to max_tokens (an upper bound)."""
        return sum(e.concurrency * self.requests_per_slot * e.max_tokens for e in self.experiments)

    def estimated_seconds(self, tps: float = DEFAULT_TPS) -> float:
        """Roughly how long the plan takes at `tps` output tokens per second."""
        if not tps > 0:
            raise UsageError(f"TPS must be positive, got {tps}")
        return self.max_output_tokens / tps

    def _shape(self) -> str:
        if self.runs_per_block == len(self.cells):
            return f"{len(self.cells)} cells x {self.repeats} repeats"
        return f"{self.runs_per_block} runs over {len(self.cells)} cells x {self.repeats} repeats"

    def summary(self, tps: float = DEFAULT_TPS) -> str:
        return (f"Design: {self.design} ({self.array}), {self._shape()} = "
                f"{len(self.experiments)} experiments, run in randomised order (seed {self.seed})\n"
                f"Requests: {self.total_requests:,} ({self.requests_per_slot} per concurrency slot); "
                f"output tokens: at most {self.max_output_tokens:,}\n"
                f"Estimated time: about {format_duration(self.estimated_seconds(tps))} at {tps:g} TPS "
                f"(if every response runs to max_tokens)")

    def to_toml(self, tps: float = DEFAULT_TPS) -> str:
        lines = [
            f"# scm-xl plan: {self.design} design ({self.array}), {self._shape()} = "
            f"{len(self.experiments)} experiments in randomised order (seed {self.seed}).",
            f"# {self.total_requests} requests, at most {self.max_output_tokens} output tokens: about "
            f"{format_duration(self.estimated_seconds(tps))} at {tps:g} TPS.",
            "# Run it with: scm-xl collect --matrix THIS_FILE",
            f"models = {_toml_list(self.models)}",
            f"concurrency = {_toml_list(self.concurrency)}",
            f"max_tokens = {_toml_list(self.max_tokens)}",
            *([f"prompt_tokens = {_toml_list(self.prompt_tokens)}"] if self.prompt_tokens else []),
            f"requests_per_slot = {self.requests_per_slot}",
            "",
            "[plan]",
            f"design = {_toml_str(self.design)}",
            f"array = {_toml_str(self.array)}",
            f"seed = {self.seed}",
            f"repeats = {self.repeats}",
            f"cells = {len(self.cells)}",
            f"experiments = {len(self.experiments)}",
            f"total_requests = {self.total_requests}",
            f"max_output_tokens = {self.max_output_tokens}",
            f"assumed_tps = {float(tps)!r}",
            f"estimated_seconds = {float(round(self.estimated_seconds(tps), 3))!r}",
        ]
        for e in self.experiments:
            lines += ["", "[[experiments]]"]
            for key in EXPERIMENT_KEYS:  # the keys `collect --matrix` reads back
                value = getattr(e, "prompt_level" if key == "prompt_tokens" else key)
                if value is not None:
                    lines.append(f"{key} = {_toml_str(value) if isinstance(value, str) else value}")
        return "\n".join(lines) + "\n"


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _toml_list(values: Sequence[str] | Sequence[int]) -> str:
    return "[" + ", ".join(_toml_str(v) if isinstance(v, str) else str(v) for v in values) + "]"


# ---------------------------------------------------------------------------
# Designs
# ---------------------------------------------------------------------------

def _check_levels(name: str, values: Sequence[int]) -> tuple[int, ...]:
    if not values:
        raise UsageError(f"{name} needs at least one level")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} levels must be positive integers, got {value!r}")
    if len(set(values)) != len(values):
        raise UsageError(f"{name} levels repeat: {', '.join(map(str, values))}")
    return tuple(sorted(values))


def _check_models(models: Sequence[str]) -> tuple[str, ...]:
    if isinstance(models, str):
        models = (models,)
    cleaned = tuple(m.strip() for m in models)
    if not cleaned or any(not m for m in cleaned):
        raise UsageError("models must be one or more non-empty names")
    if len(set(cleaned)) != len(cleaned):
        raise UsageError(f"models repeat: {', '.join(cleaned)}")
    check_model_names(cleaned)  # the names the workbook accepts, as `collect` checks them
    return cleaned


def _cell(model: str, c: int, length: int, prompt: int | None) -> DesignPoint:
    return (model, c, length) if prompt is None else (model, c, length, prompt)


def _prompts(prompt_tokens: Sequence[int]) -> list[int | None]:
    return list(sorted(prompt_tokens)) if prompt_tokens else [None]


def ofat_cells(models: Sequence[str], concurrency: Sequence[int], max_tokens: Sequence[int],
               prompt_tokens: Sequence[int] = ()) -> list[DesignPoint]:
    base_model = models[0]
    base_length = PREFERRED_BASE_MAX_TOKENS if PREFERRED_BASE_MAX_TOKENS in max_tokens else min(max_tokens)
    base_c = min(concurrency)
    prompts = _prompts(prompt_tokens)
    base_prompt = prompts[0]
    cells = [_cell(base_model, c, base_length, base_prompt) for c in sorted(concurrency)]
    cells += [_cell(base_model, base_c, length, base_prompt) for length in sorted(max_tokens) if length != base_length]
    cells += [_cell(base_model, base_c, base_length, prompt) for prompt in prompts[1:]]
    cells += [_cell(m, base_c, base_length, base_prompt) for m in models[1:]]
    return cells


def full_cells(models: Sequence[str], concurrency: Sequence[int], max_tokens: Sequence[int],
               prompt_tokens: Sequence[int] = ()) -> list[DesignPoint]:
    return [_cell(m, c, length, prompt) for m in models for c in sorted(concurrency) for length in sorted(max_tokens)
            for prompt in _prompts(prompt_tokens)]


def orthogonal_cells(models: Sequence[str], concurrency: Sequence[int], max_tokens: Sequence[int],
                     prompt_tokens: Sequence[int] = ()) -> tuple[str, list[DesignPoint]]:
    """(array name, runs): the smallest orthogonal array over the factors with 2+ levels.

    The runs of a collapsed array can repeat a cell; `make_plan` merges them.
    """
    factors: list[list[str] | list[int]] = [list(models), sorted(concurrency), sorted(max_tokens)]
    if prompt_tokens:
        factors.append(sorted(prompt_tokens))
    varying = [i for i, levels in enumerate(factors) if len(levels) > 1]
    full = full_cells(models, concurrency, max_tokens, prompt_tokens)
    full_name = _full_name(models, concurrency, max_tokens, prompt_tokens)
    if len(varying) < 3:
        return full_name, full
    counts = [len(factors[i]) for i in varying]
    # L(q^2) has q + 1 columns: four varying factors need q >= 3
    q = smallest_prime_power(max(*counts, len(varying) - 1))
    if q is None or q * q >= len(full):
        return full_name, full
    rows = orthogonal_array(q, len(varying))
    cells: list[DesignPoint] = []
    for row in rows:
        chosen: list[str | int] = [levels[0] for levels in factors]
        for column, i in enumerate(varying):
            chosen[i] = factors[i][row[column] % len(factors[i])]
        cells.append(_cell(str(chosen[0]), int(chosen[1]), int(chosen[2]),
                           int(chosen[3]) if prompt_tokens else None))
    return f"L{q * q}", cells


def _full_name(models: Sequence[str], concurrency: Sequence[int], max_tokens: Sequence[int],
               prompt_tokens: Sequence[int] = ()) -> str:
    counts = [len(levels) for levels in (models, concurrency, max_tokens, prompt_tokens) if len(levels) > 1]
    return "full factorial " + "x".join(map(str, counts)) if counts else "single cell"


def smallest_prime_power(n: int) -> int | None:
    """The smallest prime power q >= max(n, 2), or None above the supported field sizes."""
    for q in range(max(n, 2), _MAX_FIELD_ORDER + 1):
        if _prime_power(q) is not None:
            return q
    return None


def _prime_power(q: int) -> tuple[int, int] | None:
    for p in range(2, q + 1):
        if q % p == 0:
            k, rest = 0, q
            while rest % p == 0:
                rest //= p
                k += 1
            return (p, k) if rest == 1 else None
    return None


def orthogonal_array(q: int, columns: int) -> list[tuple[int, ...]]:
    """OA(q^2, columns, q, 2): rows (a, b) over GF(q), columns b, a, a + b, a + 2b, ...

    Any two columns hold every pair of symbols exactly once. Needs columns <= q + 1.
    """
    if columns > q + 1:
        raise UsageError(f"an L{q * q} array has at most {q + 1} columns, asked for {columns}")
    add, mul = galois_field(q)
    rows = []
    for a, b in itertools.product(range(q), repeat=2):
        row = [b] + [add[a][mul[lam][b]] for lam in range(q)]
        rows.append(tuple(row[:columns]))
    return rows


def galois_field(q: int) -> tuple[list[list[int]], list[list[int]]]:
    """Addition and multiplication tables of GF(q), elements 0..q-1 (base-p digit polynomials)."""
    power = _prime_power(q)
    if power is None:
        raise UsageError(f"GF({q}) does not exist: {q} is not a prime power")
    p, k = power
    if k == 1:
        return ([[(a + b) % p for b in range(q)] for a in range(q)],
                [[(a * b) % p for b in range(q)] for a in range(q)])

    def digits(x: int) -> list[int]:
        return [(x // p ** i) % p for i in range(k)]

    def number(ds: Sequence[int]) -> int:
        return sum(d * p ** i for i, d in enumerate(ds))

    def poly_mul(a: int, b: int, modulus: Sequence[int]) -> int:
        product = [0] * (2 * k - 1)
        for i, x in enumerate(digits(a)):
            for j, y in enumerate(digits(b)):
                product[i + j] = (product[i + j] + x * y) % p
        for degree in range(2 * k - 2, k - 1, -1):  # reduce by the monic modulus of degree k
            factor = product[degree]
            if factor:
                for i, m in enumerate(modulus):
                    product[degree - k + i] = (product[degree - k + i] - factor * m) % p
        return number(product[:k])

    add = [[number([(x + y) % p for x, y in zip(digits(a), digits(b))]) for b in range(q)] for a in range(q)]
    for low in range(q):  # modulus x^k + (low's digits): the first without zero divisors is irreducible
        modulus = digits(low) + [1]
        if digits(low)[0] == 0:
            continue
        mul = [[poly_mul(a, b, modulus) for b in range(q)] for a in range(q)]
        if all(mul[a][b] != 0 for a in range(1, q) for b in range(1, q)):
            return add, mul
    raise AssertionError(f"no irreducible polynomial found for GF({q})")  # cannot happen


# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------

def make_plan(*, models: Sequence[str], concurrency: Sequence[int], max_tokens: Sequence[int],
              design: str = "orthogonal", repeats: int = 3, requests_per_slot: int = 10,
              seed: int | None = None, prompt_tokens: Sequence[int] = ()) -> Plan:
    """Cells of the design, each `repeats` times, in blocked random order (see module doc);
    `prompt_tokens`, when given, is a fourth factor (prompt levels)."""
    if design not in DESIGNS:
        raise UsageError(f"unknown design {design!r} (choose from {', '.join(DESIGNS)})")
    models_ = _check_models(models)
    concurrency_ = _check_levels("concurrency", concurrency)
    lengths = _check_levels("max_tokens", max_tokens)
    prompts = _check_levels("prompt_tokens", prompt_tokens) if prompt_tokens else ()
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UsageError(f"repeats must be at least 1, got {repeats!r}")
    if isinstance(requests_per_slot, bool) or not isinstance(requests_per_slot, int) or requests_per_slot < 1:
        raise UsageError(f"requests per slot must be at least 1, got {requests_per_slot!r}")
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2 ** 31)

    if design == "ofat":
        array, cells = "one factor at a time", ofat_cells(models_, concurrency_, lengths, prompts)
    elif design == "full":
        array = _full_name(models_, concurrency_, lengths, prompts)
        cells = full_cells(models_, concurrency_, lengths, prompts)
    else:
        array, cells = orthogonal_cells(models_, concurrency_, lengths, prompts)

    # Distinct cells in canonical order; a cell an array lists twice runs twice per block.
    model_rank = {m: i for i, m in enumerate(models_)}
    distinct = sorted(set(cells), key=lambda cell: (model_rank[cell[0]], *cell[1:]))
    runs = tuple(cells.count(cell) for cell in distinct)
    # what `collect --matrix` would refuse, refused before the experiments are made (or a file written)
    check_matrix_size(models=len(models_), concurrency=concurrency_, max_tokens=lengths, prompt_levels=len(prompts),
                      requests_per_slot=requests_per_slot, experiments=repeats * sum(runs))
    numbered_repeats = repeats * max(runs)

    rng = random.Random(seed)
    experiments: list[Experiment] = []
    done = [0] * len(distinct)
    for _ in range(repeats):
        block = [index for index, count in enumerate(runs) for _ in range(count)]
        rng.shuffle(block)
        for index in block:
            model, c, length, *prompt = distinct[index]
            done[index] += 1
            exp_id = experiment_id(index + 1, done[index], numbered=numbered_repeats > 1)
            experiments.append(Experiment(order=len(experiments) + 1, exp_id=exp_id, model=model,
                                          concurrency=c, max_tokens=length, repeat=done[index], cell=index + 1,
                                          prompt_level=prompt[0] if prompt else None))
    return Plan(design=design, array=array, models=models_, concurrency=concurrency_, max_tokens=lengths,
                repeats=repeats, requests_per_slot=requests_per_slot, seed=seed, cells=tuple(distinct),
                runs_per_repeat=runs, experiments=tuple(experiments), prompt_tokens=prompts)


def write_plan(plan: Plan, path: str | Path, *, tps: float = DEFAULT_TPS, overwrite: bool = False) -> None:
    """Write the plan's TOML matrix file; refuse to replace an existing file unless `overwrite`."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise InputError("already exists (use --force to replace it)", path=str(target))
    text = plan.to_toml(tps)
    size = len(text.encode("utf-8"))
    if size > MAX_MATRIX_BYTES:
        raise InputError(f"refused: the matrix file would be {size:,} bytes, above {size_text(MAX_MATRIX_BYTES)}, the "
                         "most `scm-xl collect --matrix` reads: fewer levels or repeats (or shorter model names)",
                         path=str(target))
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=str(target)) from exc
