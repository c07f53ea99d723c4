"""The constrained inverse: cheapest configuration, binding constraint, interpolation, the dual."""

from __future__ import annotations

import math

import pytest

from scm_xl import constrained, lsq
from scm_xl.constrained import Constraints, chain_surface, lsq_surface, solve
from scm_xl.model import calibrate, filter_rows
from scm_xl.results import ResultRow
from support.rows import make_row

BASE_TPS = 50.0
F = {1: 1.0, 2: 1.9, 4: 3.5, 8: 6.0, 16: 9.0}
K = {50: 1.0, 100: 0.9, 200: 0.75}
C = {"Alpha": 1.0, "Beta": 1.6, "Gamma": 2.5}


def latency(c: int, length: int) -> float:
    return 0.02 * length * (1 + c / 8)


def data(models=("Alpha", "Beta", "Gamma"), extra=()) -> list[ResultRow]:
    """Two runs per cell, +-1% around the truth, with measured P95 latency and TTFT."""
    rows = []
    for m in models:
        for c in F:
            for length in K:
                for r, wobble in enumerate((1.01, 0.99)):
                    tps = BASE_TPS * F[c] * K[length] / C[m] * wobble
                    rows.append(make_row(f"{m}-{c}-{length}-{r}", m, c, length, tps,
                                         latency_p95_s=latency(c, length), ttft_p95_s=0.05 * c))
    return rows + list(extra)


@pytest.fixture(scope="module")
def rows() -> list[ResultRow]:
    return data()


@pytest.fixture(scope="module")
def fit(rows) -> lsq.LsqFit:
    return lsq.fit(filter_rows(rows))


@pytest.fixture(scope="module")
def surface(fit) -> constrained.Surface:
    return lsq_surface(fit)


def tps(fit, c, length=50, model="Alpha", **kw) -> float:
    return fit.forecast(c, length, model, **kw).tps


def test_cheapest_meets_the_target_and_the_target_binds(fit, surface, rows):
    target = tps(fit, 4) * 0.999
    solution = solve(surface, target, rows=rows)
    best = solution.cheapest
    assert (best.model, best.concurrency, best.max_tokens) == ("Alpha", 4, 50)
    assert not best.interpolated and not best.extrapolated
    assert best.mean_interval[0] < best.tps < best.mean_interval[1]
    assert best.prediction_interval[0] < best.mean_interval[0]
    assert best.latency_p95_s == pytest.approx(latency(4, 50))
    assert solution.binding == ("target_tps",) and solution.blocked is None
    assert solution.reachable


def test_between_measured_levels_concurrency_is_interpolated(fit, surface, rows):
    target = math.sqrt(tps(fit, 4) * tps(fit, 8))  # the log-log midpoint is c = sqrt(32) = 5.66
    solution = solve(surface, target, rows=rows)
    best = solution.cheapest
    assert (best.model, best.concurrency, best.max_tokens) == ("Alpha", 6, 50)
    assert best.interpolated and best.latency_p95_s is None
    weight = math.log(6 / 4) / math.log(8 / 4)
    f6 = math.exp((1 - weight) * math.log(fit.calibration.f(4)) + weight * math.log(fit.calibration.f(8)))
    assert best.tps == pytest.approx(fit.calibration.base_tps * f6)
    assert tps(fit, 5) < target <= best.tps
    assert any("interpolated" in note for note in solution.notes)


def test_max_concurrency_binds_and_the_dual_answer(fit, surface, rows):
    target = tps(fit, 4) * 1.05
    solution = solve(surface, target, rows=rows, constraints=Constraints(max_concurrency=4))
    assert not solution.reachable and solution.cheapest is None
    assert solution.binding == ("max_concurrency",)
    assert solution.blocked.concurrency == 5 and solution.blocked.interpolated
    dual = solution.best
    assert (dual.model, dual.concurrency, dual.max_tokens) == ("Alpha", 4, 50)
    assert dual.tps == pytest.approx(tps(fit, 4))
    assert "max_concurrency" in solution.best_binding
    report = solution.report()
    assert report["reachable"] is False and report["best"]["concurrency"] == 4
    assert report["binding"] == ["max_concurrency"]


def test_a_config_without_measured_latency_cannot_be_proven(fit, surface, rows):
    target = math.sqrt(tps(fit, 4) * tps(fit, 8))
    limit = latency(8, 50) * 1.01
    solution = solve(surface, target, rows=rows, constraints=Constraints(max_latency_p95_s=limit))
    best = solution.cheapest
    assert (best.model, best.concurrency, best.max_tokens) == ("Alpha", 8, 50)
    assert solution.binding == ("latency_p95_unmeasured",)
    assert solution.blocked.concurrency == 6
    assert any("cannot be proven" in note for note in solution.notes)

    tighter = solve(surface, target, rows=rows, constraints=Constraints(max_latency_p95_s=latency(4, 50) * 1.01))
    assert not tighter.reachable
    c8 = next(c for c in tighter.candidates if (c.model, c.concurrency, c.max_tokens) == ("Alpha", 8, 50))
    assert c8.rejected_by == ("latency_p95",)
    assert (tighter.best.concurrency, tighter.best.max_tokens) == (4, 50)


def test_ttft_limit(fit, surface, rows):
    solution = solve(surface, tps(fit, 2) * 0.999, rows=rows, constraints=Constraints(max_ttft_p95_s=0.05))
    assert solution.cheapest is None  # ttft at c=2 is 0.1 s; c=1 cannot reach the target
    assert solution.binding == ("ttft_p95",)
    assert solution.best.concurrency == 1


def test_rate_limit_onset_excludes_that_concurrency_and_above(fit):
    limited = make_row("RL", "Alpha", 16, 200, 100.0, rate_limited_requests=3)
    rows = data(extra=[limited])
    result = lsq.fit(filter_rows(rows))
    assert constrained.rate_limit_onsets(rows) == {"alpha": 16}
    target = tps(result, 16) * 0.999
    solution = solve(lsq_surface(result), target, rows=rows)
    assert not solution.reachable
    assert solution.binding == ("rate_limit",)
    assert solution.blocked.concurrency == 16
    assert any("429" in note for note in solution.notes)
    given = solve(lsq_surface(result), target, rows=rows[:-1], constraints=Constraints(rate_limit_concurrency=32))
    assert given.cheapest.concurrency == 16


def test_extrapolation_only_when_allowed(fit, surface, rows):
    target = tps(fit, 16) * 1.1
    refused = solve(surface, target, rows=rows)
    assert not refused.reachable and refused.binding == ("extrapolation",)
    assert refused.blocked.extrapolated and refused.blocked.concurrency > 16
    assert any("extrapolat" in note for note in refused.notes)
    allowed = solve(surface, target, rows=rows, extrapolate=True)
    assert allowed.reachable and allowed.cheapest.extrapolated
    assert allowed.cheapest.concurrency == refused.blocked.concurrency
    assert any("extrapolated" in note for note in allowed.notes)


def test_allowed_models_and_lengths_and_cost_order(fit, surface, rows):
    cheap = solve(surface, 1.0, rows=rows)
    assert (cheap.cheapest.model, cheap.cheapest.concurrency, cheap.cheapest.max_tokens) == ("Alpha", 1, 50)
    others = solve(surface, 1.0, rows=rows, constraints=Constraints(models=("gamma", "BETA")))
    assert others.cheapest.model == "Beta"  # the smaller C_model first
    assert others.binding == ("model",) and others.blocked.model == "Alpha"
    length = solve(surface, 1.0, rows=rows, constraints=Constraints(max_tokens=(100, 300)))
    assert length.cheapest.max_tokens == 100
    assert any("300" in note for note in length.notes)


def test_conservative_uses_the_lower_bound(fit, surface, rows):
    target = tps(fit, 4) * 0.999
    plain = solve(surface, target, rows=rows)
    careful = solve(surface, target, rows=rows, conservative=True)
    assert careful.cheapest.mean_interval[0] >= target
    assert careful.cheapest.cost > plain.cheapest.cost


def test_chain_surface_matches_lsq_on_an_exactly_identified_design():
    cells = ([("Alpha", c, 50) for c in (1, 2, 4, 8)] + [("Alpha", 1, length) for length in (100, 200)]
             + [("Beta", 1, 50)])
    rows = [make_row(f"E{i}", m, c, length, BASE_TPS * F[c] * K[length] / C[m] * (1 + 0.03 * (-1) ** i),
                     latency_p95_s=latency(c, length))
            for i, (m, c, length) in enumerate(cells)]
    statuses = filter_rows(rows)
    chain = chain_surface(calibrate(statuses))
    least = lsq_surface(lsq.fit(statuses))
    for target in (60.0, 140.0, 250.0):
        a, b = solve(chain, target, rows=rows), solve(least, target, rows=rows)
        assert (a.cheapest.model, a.cheapest.concurrency, a.cheapest.max_tokens) == \
               (b.cheapest.model, b.cheapest.concurrency, b.cheapest.max_tokens)
        assert a.cheapest.tps == pytest.approx(b.cheapest.tps, rel=1e-9)
        assert a.cheapest.mean_interval is None and b.cheapest.mean_interval is None  # no residual dof
    careful = solve(chain, 60.0, rows=rows, conservative=True)
    assert any("point estimate" in note for note in careful.notes)


def test_measured_percentiles_use_fault_free_runs_median():
    rows = [make_row("A", "m", 2, 50, 90, latency_p95_s=1.0, ttft_p95_s=0.1),
            make_row("B", "M", 2, 50, 92, latency_p95_s=3.0, ttft_p95_s=0.3),
            make_row("C", "m", 2, 50, 80, latency_p95_s=9.0, failed_requests=1)]
    cells = constrained.measured_percentiles(rows)
    assert cells[("m", 2, 50)] == constrained.CellPercentiles(latency_p95_s=2.0, ttft_p95_s=0.2, runs=2)


def test_bad_inputs(surface):
    with pytest.raises(ValueError):
        Constraints(max_latency_p95_s=0)
    with pytest.raises(ValueError):
        Constraints(max_concurrency=0)
    with pytest.raises(ValueError):
        solve(surface, 0)


def test_a_solve_request_narrows_the_allowed_sets_by_the_fixed_knobs() -> None:
    from scm_xl.constrained import SolveRequest

    assert not SolveRequest(max_tokens=50, model="m").searches_every_knob  # the article's inverse
    assert SolveRequest(method="chain").searches_every_knob
    assert SolveRequest(max_concurrency=4).searches_every_knob
    request = SolveRequest(max_tokens=100, model="Model-B", allowed_max_tokens=(50, 100, 200),
                           allowed_models=("model-a", "model-b"), max_concurrency=8)
    constraints = request.constraints()
    assert (constraints.max_tokens, constraints.models, constraints.max_concurrency) == ((100,), ("model-b",), 8)
    assert SolveRequest(max_tokens=300, allowed_max_tokens=(50,)).constraints().max_tokens == ()
    assert SolveRequest().constraints().models is None


def test_every_machine_name_has_words() -> None:
    from scm_xl import constrained

    names = [value for key, value in vars(constrained).items() if key.isupper() and isinstance(value, str)]
    assert set(names) == set(constrained.REASON_WORDS)
    assert constrained.describe_reasons(["max_concurrency", "rate_limit"]) == (
        "above the highest concurrency allowed; at or above the concurrency where the provider answers HTTP 429")
