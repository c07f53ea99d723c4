"""Designed experiments and `scm-xl plan`."""

from __future__ import annotations

import tomllib
from collections import Counter
from itertools import combinations

import numpy as np
import pytest
from click.testing import CliRunner

from scm_xl import lsq, plan
from scm_xl.cli.plan import plan as plan_command
from scm_xl.errors import InputError, UsageError
from scm_xl.model import calibrate, filter_rows
from scm_xl.results import ResultRow
from support.rows import make_row

MODELS = ("Alpha", "Beta", "Gamma")


def rows_of(p: plan.Plan) -> list[ResultRow]:
    """Separable synthetic results for every experiment of a plan."""
    c_model = {m: 1.0 + i * 0.5 for i, m in enumerate(p.models)}
    return [make_row(e.exp_id, e.model, e.concurrency, e.max_tokens,
                     40.0 * e.concurrency ** 0.8 * (100 / e.max_tokens) ** 0.1 / c_model[e.model])
            for e in p.experiments]


def factor_values(p: plan.Plan) -> list[tuple[str, int, int]]:
    return [(e.model, e.concurrency, e.max_tokens) for e in p.experiments]


def test_ofat_is_the_articles_design_and_exactly_identifies_the_chain():
    p = plan.make_plan(models=MODELS, concurrency=[4, 1, 2, 8], max_tokens=[100, 50, 200], design="ofat",
                       repeats=1, seed=1)
    assert p.cells == (("Alpha", 1, 50), ("Alpha", 1, 100), ("Alpha", 1, 200), ("Alpha", 2, 50),
                       ("Alpha", 4, 50), ("Alpha", 8, 50), ("Beta", 1, 50), ("Gamma", 1, 50))
    assert p.array == "one factor at a time"
    statuses = filter_rows(rows_of(p))
    cal = calibrate(statuses)
    assert all(level.f is not None for level in cal.concurrency_levels)
    assert all(level.k_len is not None for level in cal.length_levels)
    assert all(level.c_model is not None for level in cal.models)
    assert lsq.fit(statuses).exactly_identified


def test_full_factorial_with_repeats():
    p = plan.make_plan(models=MODELS[:2], concurrency=[1, 2, 4], max_tokens=[50, 200], design="full",
                       repeats=3, seed=2)
    assert len(p.cells) == 12 and len(p.experiments) == 36
    assert p.array == "full factorial 2x3x2"
    assert set(Counter(factor_values(p)).values()) == {3}
    assert sorted(Counter(e.repeat for e in p.experiments).values()) == [12, 12, 12]


def test_orthogonal_l9_each_pair_of_levels_equally_often():
    p = plan.make_plan(models=MODELS, concurrency=[1, 4, 16], max_tokens=[50, 100, 200], repeats=2, seed=3)
    assert p.array == "L9" and len(p.cells) == 9 and len(p.experiments) == 18
    for i, j in combinations(range(3), 2):
        pairs = Counter((cell[i], cell[j]) for cell in p.cells)
        assert len(pairs) == 9 and set(pairs.values()) == {1}


def test_orthogonal_mixed_levels_keeps_proportional_frequencies_and_is_identifiable():
    p = plan.make_plan(models=MODELS, concurrency=[1, 2, 4, 8], max_tokens=[50, 100, 200], repeats=1, seed=4)
    assert p.array == "L16" and p.runs_per_block == 16 and len(p.experiments) == 16
    values = factor_values(p)
    for i, j in combinations(range(3), 2):
        pairs = Counter((v[i], v[j]) for v in values)
        first, second = Counter(v[i] for v in values), Counter(v[j] for v in values)
        for a in first:
            for b in second:
                assert pairs[(a, b)] * len(values) == first[a] * second[b]
    # (model, concurrency, max_tokens, repeat) stays unique when an array lists a cell twice.
    keys = [(e.model, e.concurrency, e.max_tokens, e.repeat) for e in p.experiments]
    assert len(set(keys)) == len(keys)
    design, labels = lsq.design_matrix(values, base_model="Alpha", base_concurrency=1, base_max_tokens=50)
    assert np.linalg.matrix_rank(design) == len(labels) == 1 + 3 + 2 + 2
    fitted = lsq.fit(filter_rows(rows_of(p)))
    assert fitted.unidentified == ()


def test_orthogonal_with_two_factors_is_the_full_factorial():
    p = plan.make_plan(models=["Alpha"], concurrency=[1, 2, 4, 8, 16], max_tokens=[50, 100, 200], repeats=5,
                       seed=5)
    assert p.array == "full factorial 5x3" and len(p.cells) == 15 and len(p.experiments) == 75


@pytest.mark.parametrize("q", [2, 3, 4, 5, 7, 8, 9, 16])
def test_galois_field_arrays_have_strength_two(q):
    array = plan.orthogonal_array(q, min(q + 1, 4))
    assert len(array) == q * q
    for i, j in combinations(range(len(array[0])), 2):
        assert set(Counter((row[i], row[j]) for row in array).values()) == {1}
        assert len({(row[i], row[j]) for row in array}) == q * q


def test_smallest_prime_power():
    assert [plan.smallest_prime_power(n) for n in (1, 2, 3, 4, 5, 6, 10, 12)] == [2, 2, 3, 4, 5, 7, 11, 13]


def test_run_order_is_randomised_in_blocks_and_reproducible():
    kwargs = dict(models=["Alpha"], concurrency=[1, 2, 4, 8, 16], max_tokens=[50, 100, 200], repeats=4)
    a, b, c = plan.make_plan(**kwargs, seed=7), plan.make_plan(**kwargs, seed=7), plan.make_plan(**kwargs, seed=8)
    assert a.experiments == b.experiments and a.experiments != c.experiments
    canonical = [e for e in a.experiments if e.repeat == 1]
    assert [(e.concurrency, e.max_tokens) for e in canonical] != sorted((e.concurrency, e.max_tokens)
                                                                        for e in canonical)
    for block in range(4):
        cells = [e.cell for e in a.experiments[block * 15:(block + 1) * 15]]
        assert sorted(cells) == list(range(1, 16))
        assert {e.repeat for e in a.experiments[block * 15:(block + 1) * 15]} == {block + 1}
    assert [e.order for e in a.experiments] == list(range(1, 61))
    drawn = plan.make_plan(**kwargs)
    assert plan.make_plan(**kwargs, seed=drawn.seed).experiments == drawn.experiments


def test_cost_estimate():
    p = plan.make_plan(models=["m"], concurrency=[1, 2], max_tokens=[50, 100], design="full", repeats=2,
                       requests_per_slot=5, seed=1)
    assert p.total_requests == 2 * 5 * (1 + 1 + 2 + 2)
    assert p.max_output_tokens == 2 * 5 * (50 + 100 + 2 * 50 + 2 * 100)
    assert p.estimated_seconds(50.0) == pytest.approx(p.max_output_tokens / 50.0)
    with pytest.raises(UsageError):
        p.estimated_seconds(0)


def test_toml_matrix_file_reads_back(tmp_path):
    p = plan.make_plan(models=['Qwen/Qwen2.5-7B "Instruct"', "b"], concurrency=[1, 2, 4],
                       max_tokens=[50, 100, 200], repeats=2, seed=11)
    path = tmp_path / "matrix.toml"
    plan.write_plan(p, path, tps=80.0)
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data["models"] == list(p.models)
    assert data["concurrency"] == [1, 2, 4] and data["max_tokens"] == [50, 100, 200]
    assert data["requests_per_slot"] == 10
    assert data["plan"]["design"] == "orthogonal" and data["plan"]["seed"] == 11
    assert data["plan"]["experiments"] == len(p.experiments) == len(data["experiments"])
    assert data["plan"]["estimated_seconds"] == pytest.approx(p.max_output_tokens / 80.0)
    first = data["experiments"][0]
    assert set(first) == {"order", "exp_id", "model", "concurrency", "max_tokens", "repeat"}
    assert [(e["model"], e["concurrency"], e["max_tokens"], e["repeat"]) for e in data["experiments"]] == \
           [(e.model, e.concurrency, e.max_tokens, e.repeat) for e in p.experiments]
    assert len({e["exp_id"] for e in data["experiments"]}) == len(p.experiments)
    with pytest.raises(InputError, match="already exists"):
        plan.write_plan(p, path)
    plan.write_plan(p, path, overwrite=True)


def test_exp_ids_follow_the_collectors_numbering():
    single = plan.make_plan(models=["m"], concurrency=[1, 2], max_tokens=[50], design="full", repeats=1, seed=1)
    assert sorted(e.exp_id for e in single.experiments) == ["E001", "E002"]
    double = plan.make_plan(models=["m"], concurrency=[1, 2], max_tokens=[50], design="full", repeats=2, seed=1)
    assert sorted(e.exp_id for e in double.experiments) == ["E001-R1", "E001-R2", "E002-R1", "E002-R2"]


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(design="latin"), "unknown design"),
    (dict(concurrency=[1, 1, 2]), "concurrency levels repeat"),
    (dict(concurrency=[0, 2]), "positive integers"),
    (dict(max_tokens=[]), "max_tokens needs at least one level"),
    (dict(models=["a", "A"]), "differ only in case"),
    (dict(models=["a", "a"]), "models repeat"),
    (dict(models=["qwen*"]), "wildcard"),
    (dict(models=["7"]), "is a number"),
    (dict(models=[" "]), "non-empty"),
    (dict(repeats=0), "repeats must be at least 1"),
    (dict(requests_per_slot=0), "requests per slot"),
])
def test_bad_plans(kwargs, message):
    arguments = dict(models=["m"], concurrency=[1, 2], max_tokens=[50], seed=1) | kwargs
    with pytest.raises(UsageError, match=message):
        plan.make_plan(**arguments)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def run_cli(*args):
    return CliRunner().invoke(plan_command, [str(a) for a in args])


def test_cli_writes_the_plan_and_prints_the_cost(tmp_path):
    out = tmp_path / "m.toml"
    result = run_cli("-c", "1,2,4,8,16", "--max-tokens", "50,100,200", "--repeats", "5", "--seed", "3",
                     "--tps", "200", "-o", out)
    assert result.exit_code == 0, result.output
    assert "Design: orthogonal (full factorial 5x3), 15 cells x 5 repeats = 75 experiments" in result.output
    assert "Requests: 4,650 (10 per concurrency slot)" in result.output
    assert "at 200 TPS" in result.output and f"Wrote {out}" in result.output
    data = tomllib.loads(out.read_text(encoding="utf-8"))
    assert len(data["experiments"]) == 75 and data["plan"]["seed"] == 3


def test_cli_models_and_designs(tmp_path):
    out = tmp_path / "m.toml"
    result = run_cli("--models", "a,b", "-m", "c", "-c", "1,2,4", "--design", "ofat", "-r", "1", "-o", out)
    assert result.exit_code == 0, result.output
    assert tomllib.loads(out.read_text(encoding="utf-8"))["models"] == ["a", "b", "c"]
    assert "one factor at a time" in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["-c", "0,2"], "Error: concurrency levels must be positive integers, got 0"),
    (["--repeats", "0"], "Error: repeats must be at least 1, got 0"),
    (["--tps", "0"], "Error: --tps must be positive, got 0"),
    (["-c", "1,x"], "Error: Invalid value for '--concurrency'"),
    (["--design", "latin"], "Error: Invalid value for '--design'"),
])
def test_cli_errors(tmp_path, args, message):
    result = run_cli(*args, "-o", tmp_path / "m.toml")
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "m.toml").exists()


def test_cli_refuses_to_overwrite(tmp_path):
    out = tmp_path / "m.toml"
    out.write_text("keep", encoding="utf-8")
    result = run_cli("-o", out)
    assert result.exit_code == 2 and f"Error: {out}: already exists (use --force" in result.output
    assert out.read_text(encoding="utf-8") == "keep"
    assert run_cli("-o", out, "--force").exit_code == 0
