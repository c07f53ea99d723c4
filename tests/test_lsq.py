"""The least-squares calibration against known truth, numpy OLS, the chain and brute-force refits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scm_xl import lsq
from scm_xl.model import Settings, calibrate, filter_rows
from scm_xl.results import ResultRow, read_results
from support.rows import make_row
from support.paths import ARTICLE


BASE_TPS = 50.0
F = {1: 1.0, 2: 1.9, 4: 3.5, 8: 6.0, 16: 9.0}
K = {50: 1.0, 100: 0.9, 200: 0.75}
C = {"Alpha": 1.0, "Beta": 1.6, "Gamma": 2.5}


def true_tps(model: str, concurrency: int, max_tokens: int) -> float:
    return BASE_TPS * F[concurrency] * K[max_tokens] / C[model]


def simulate(cells, repeats: int, sigma: float, rng: np.random.Generator, effect=None) -> list[ResultRow]:
    """Rows of the cells, `repeats` each, TPS = truth x exp(N(0, sigma)) x effect(cell)."""
    rows = []
    for r in range(repeats):
        for i, (model, c, length) in enumerate(cells):
            tps = true_tps(model, c, length) * math.exp(rng.normal(0.0, sigma))
            if effect is not None:
                tps *= effect(model, c, length)
            rows.append(make_row(f"E{i + 1:03d}-R{r + 1}", model, c, length, tps))
    return rows


def full(models=("Alpha",), concurrency=tuple(F), lengths=tuple(K)):
    return [(m, c, length) for m in models for c in concurrency for length in lengths]


def truth_of(label: str) -> float:
    if label == "BaseTPS":
        return BASE_TPS
    kind, level = label.rstrip(")").split("(")
    if kind == "f":
        return F[int(level)]
    if kind == "K_len":
        return K[int(level)]
    return C[level]


# ---------------------------------------------------------------------------
# Student's t
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dof", [1, 2, 3, 4.5, 5, 8, 12, 30, 100, 1000, 20000])
def test_t_quantile_matches_scipy(dof):
    stats = pytest.importorskip("scipy.stats")
    for p in (0.001, 0.05, 0.5, 0.6, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9999):
        expected = stats.t.ppf(p, dof)
        assert lsq.t_ppf(p, dof) == pytest.approx(expected, rel=1e-9, abs=1e-10)
    for t in (-4.0, -1.0, 0.3, 2.0, 10.0):
        assert lsq.t_cdf(t, dof) == pytest.approx(stats.t.cdf(t, dof), rel=1e-9, abs=1e-12)


def test_t_quantile_known_values_and_errors():
    assert lsq.t_ppf(0.95, 1) == pytest.approx(6.313751514675, rel=1e-10)
    assert lsq.t_two_sided(0.90, 10) == pytest.approx(1.812461122811, rel=1e-10)
    with pytest.raises(ValueError):
        lsq.t_ppf(1.0, 5)
    with pytest.raises(ValueError):
        lsq.t_ppf(0.5, 0)


# ---------------------------------------------------------------------------
# Recovery, OLS equality, chain equality
# ---------------------------------------------------------------------------

def test_recovers_known_coefficients():
    rng = np.random.default_rng(1)
    rows = simulate(full(models=tuple(C)), repeats=3, sigma=0.03, rng=rng)
    result = lsq.fit(filter_rows(rows))
    assert result.dof == len(rows) - result.parameters and result.rank == result.parameters
    assert result.sigma == pytest.approx(0.03, rel=0.25)
    for coefficient in result.coefficients:
        assert coefficient.value == pytest.approx(truth_of(coefficient.label), rel=0.04), coefficient.label
        low, high = coefficient.interval
        assert low < coefficient.value < high
    assert result.calibration.c_model("GAMMA") == pytest.approx(2.5, rel=0.04)  # case-insensitive


def test_equals_numpy_lstsq_on_overdetermined_design():
    rng = np.random.default_rng(2)
    cells = full(models=("Alpha", "Beta"), concurrency=(1, 2, 4), lengths=(50, 200))
    rows = simulate(cells, repeats=2, sigma=0.1, rng=rng)
    statuses = filter_rows(rows)
    result = lsq.fit(statuses)
    used = lsq.fitted_rows(statuses)
    design, labels = lsq.design_matrix([(s.model, s.concurrency, s.max_tokens) for s in used],
                                       base_model="Alpha", base_concurrency=1, base_max_tokens=50)
    response = np.log([s.tps for s in used])
    beta, *_ = np.linalg.lstsq(design, response, rcond=None)
    assert [c.label for c in result.coefficients] == labels
    assert np.allclose(np.log([c.value for c in result.coefficients]), beta, atol=1e-12)
    residuals = response - design @ beta
    dof = len(response) - design.shape[1]
    sigma2 = residuals @ residuals / dof
    assert result.sigma ** 2 == pytest.approx(sigma2, rel=1e-10)
    assert np.allclose(result.covariance, sigma2 * np.linalg.inv(design.T @ design), rtol=1e-8, atol=1e-14)
    t = lsq.t_two_sided(0.90, dof)
    for j, coefficient in enumerate(result.coefficients):
        se = math.sqrt(sigma2 * np.linalg.inv(design.T @ design)[j, j])
        assert coefficient.interval == pytest.approx((math.exp(beta[j] - t * se), math.exp(beta[j] + t * se)))


def test_statsmodels_cross_check_when_installed():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    rows = simulate(full(models=("Alpha", "Beta")), repeats=2, sigma=0.05, rng=rng)
    statuses = filter_rows(rows)
    result = lsq.fit(statuses)
    used = lsq.fitted_rows(statuses)
    design, _ = lsq.design_matrix([(s.model, s.concurrency, s.max_tokens) for s in used],
                                  base_model="Alpha", base_concurrency=1, base_max_tokens=50)
    ols = sm.OLS(np.log([s.tps for s in used]), design).fit()
    intervals = ols.conf_int(alpha=0.10)
    for j, coefficient in enumerate(result.coefficients):
        assert math.log(coefficient.value) == pytest.approx(ols.params[j], abs=1e-10)
        assert np.log(coefficient.interval) == pytest.approx(intervals[j], abs=1e-9)


def test_article_example_is_exactly_identified_and_matches_the_chain():
    statuses = filter_rows(read_results(ARTICLE).rows)
    chain = calibrate(statuses)
    result = lsq.fit(statuses)
    assert result.exactly_identified and result.sigma is None
    assert result.calibration.base_tps == pytest.approx(chain.base_tps, rel=1e-12)
    for level in chain.concurrency_levels:
        if level.f is not None:
            assert result.calibration.f(level.concurrency) == pytest.approx(level.f, rel=1e-12)
    for level in chain.length_levels:
        assert result.calibration.k_len(level.max_tokens) == pytest.approx(level.k_len, rel=1e-12)
    # The chain leaves f(8) unidentified (no c=8 row at the base length); least squares
    # identifies it from E07 (c=8, max_tokens=200) and K_len(200).
    assert chain.f(8) is None
    assert result.calibration.f(8) == pytest.approx(127.39 / (45.45 * 1.358), rel=1e-2)
    assert all(c.interval is None for c in result.coefficients)
    assert lsq.lsq_holdout(result).verdict == "insufficient"


def test_one_factor_at_a_time_design_matches_the_chain_with_replicates():
    rng = np.random.default_rng(4)
    cells = ([("Alpha", c, 50) for c in F] + [("Alpha", 1, length) for length in (100, 200)]
             + [(m, 1, 50) for m in ("Beta", "Gamma")])
    rows = simulate(cells, repeats=3, sigma=0.05, rng=rng)
    statuses = filter_rows(rows)
    chain = calibrate(statuses)
    result = lsq.fit(statuses)
    # Replicates leave residual dof, but the cells identify the model exactly.
    assert result.rank == result.parameters == len(cells)
    assert result.calibration.base_tps == pytest.approx(chain.base_tps, rel=1e-12)
    for c in F:
        assert result.calibration.f(c) == pytest.approx(chain.f(c), rel=1e-12)
    for length in K:
        assert result.calibration.k_len(length) == pytest.approx(chain.k_len(length), rel=1e-12)
    for model in C:
        assert result.calibration.c_model(model) == pytest.approx(chain.c_model(model), rel=1e-12)


def test_unidentified_levels_are_reported_not_crashed():
    rows = [make_row("A1", "Alpha", 1, 50, 50), make_row("A2", "Alpha", 2, 50, 95),
            make_row("A3", "Alpha", 4, 50, 175), make_row("A4", "Alpha", 2, 50, 96),
            # Beta only ever at max_tokens 100, which Alpha never ran: C(Beta) and K(100) are aliased.
            make_row("B1", "Beta", 2, 100, 50), make_row("B2", "Beta", 4, 100, 90)]
    result = lsq.fit(filter_rows(rows))
    assert result.rank == result.parameters - 1
    assert set(result.unidentified) == {"K_len(100)", "C_model(Beta)"}
    assert result.calibration.k_len(100) is None and result.calibration.c_model("Beta") is None
    assert result.calibration.f(4) is not None
    # The product K(100)/C(Beta) is still estimable: Beta at max_tokens 100 can be predicted.
    assert result.forecast(2, 100, "Beta").tps == pytest.approx(math.sqrt(50 * 90 / (175 / 95.5)), rel=0.05)
    missing = result.forecast(2, 100, "Alpha")
    assert missing.tps is None and "K_len(100)" in missing.missing


def test_base_level_without_rows_is_rank_deficient_but_predicts():
    rows = [make_row(f"E{i}", "Alpha", c, length, true_tps("Alpha", c, length))
            for i, (_, c, length) in enumerate(full(concurrency=(2, 4, 8), lengths=(50, 100)))]
    result = lsq.fit(filter_rows(rows), Settings(base_concurrency=1))
    assert "BaseTPS" in result.unidentified and "f(2)" in result.unidentified
    assert result.forecast(4, 100, "Alpha").tps == pytest.approx(true_tps("Alpha", 4, 100), rel=1e-9)


def test_no_rows():
    rows = [make_row("E1", "Alpha", 1, 50, 50, failed_requests=1)]
    result = lsq.fit(filter_rows(rows))
    assert result.observations == 0 and result.coefficients == []
    assert result.forecast(1, 50).tps is None
    analysis = lsq.least_squares_analysis(filter_rows(rows))
    assert analysis.report()["verdict"] == "insufficient"


# ---------------------------------------------------------------------------
# Intervals cover the truth
# ---------------------------------------------------------------------------

def test_ninety_percent_intervals_cover_the_truth_about_ninety_percent_of_the_time():
    rng = np.random.default_rng(2024)
    cells = full(concurrency=(1, 2, 4, 8), lengths=(50, 100, 200))
    labels = ("BaseTPS", "f(4)", "K_len(200)")
    covered = {label: 0 for label in labels}
    mean_covered = new_covered = 0
    draws = 200
    for _ in range(draws):
        rows = simulate(cells, repeats=1, sigma=0.08, rng=rng)
        result = lsq.fit(filter_rows(rows))
        for label in labels:
            low, high = result.coefficient(label).interval
            covered[label] += low <= truth_of(label) <= high
        forecast = result.forecast(8, 100, "Alpha")
        truth = true_tps("Alpha", 8, 100)
        mean_covered += forecast.mean_interval[0] <= truth <= forecast.mean_interval[1]
        new_run = truth * math.exp(rng.normal(0.0, 0.08))
        new_covered += forecast.prediction_interval[0] <= new_run <= forecast.prediction_interval[1]
    for label in labels:
        assert 0.84 <= covered[label] / draws <= 0.96, (label, covered[label])
    assert 0.84 <= mean_covered / draws <= 0.96
    assert 0.84 <= new_covered / draws <= 0.96


def test_forecast_interpolates_in_log_log_space_and_extrapolates_only_when_asked():
    rows = [make_row(f"E{i}", m, c, length, true_tps(m, c, length) * (1.01 if i % 2 else 0.99))
            for i, (m, c, length) in enumerate(full(lengths=(50, 200)))]
    result = lsq.fit(filter_rows(rows))
    f4, f8 = result.calibration.f(4), result.calibration.f(8)
    forecast = result.forecast(6, 50, "Alpha")
    weight = math.log(6 / 4) / math.log(8 / 4)
    expected = result.calibration.base_tps * math.exp((1 - weight) * math.log(f4) + weight * math.log(f8))
    assert forecast.interpolated and not forecast.extrapolated
    assert forecast.tps == pytest.approx(expected, rel=1e-12)
    assert forecast.mean_interval[0] < forecast.tps < forecast.mean_interval[1]
    assert forecast.prediction_interval[0] < forecast.mean_interval[0]
    assert result.forecast(32, 50).tps is None
    beyond = result.forecast(32, 50, extrapolate=True)
    assert beyond.extrapolated and beyond.tps > result.forecast(16, 50).tps
    assert lsq.concurrency_blend(3, [1], extrapolate=True) is None


# ---------------------------------------------------------------------------
# Leave-one-out
# ---------------------------------------------------------------------------

def test_loo_equals_brute_force_refits():
    rng = np.random.default_rng(5)
    cells = full(models=("Alpha", "Beta"), concurrency=(1, 2, 4), lengths=(50, 200))
    rows = simulate(cells, repeats=1, sigma=0.05, rng=rng)
    rows.append(make_row("LONE", "Gamma", 2, 50, true_tps("Gamma", 2, 50)))  # only row of Gamma
    statuses = filter_rows(rows)
    holdout = lsq.lsq_holdout(lsq.fit(statuses))
    assert holdout.missing_rows == 1
    by_id = {r.exp_id: r for r in holdout.rows}
    assert by_id["LONE"].predicted_tps is None
    for i, status in enumerate(statuses):
        if status.exp_id == "LONE":
            continue
        refit = lsq.fit([s for j, s in enumerate(statuses) if j != i])
        brute = refit.forecast(status.concurrency, status.max_tokens, status.model).tps
        assert by_id[status.exp_id].predicted_tps == pytest.approx(brute, rel=1e-9)
        assert by_id[status.exp_id].error_pct == pytest.approx((status.tps - brute) / status.tps * 100, abs=1e-7)
    errors = [abs(r.error_pct) for r in holdout.rows if r.error_pct is not None]
    assert holdout.mape_pct == pytest.approx(sum(errors) / len(errors))
    assert holdout.max_pct == pytest.approx(max(errors))


def test_chain_loo_refits_the_chain_without_the_row():
    tps = {(1, 50): 50.0, (2, 50): 96.0, (4, 50): 170.0, (1, 200): 37.0, (2, 200): 74.0, (4, 200): 135.0}
    rows = [make_row(f"E{i}", "Alpha", c, length, value) for i, ((c, length), value) in enumerate(tps.items())]
    holdout = lsq.chain_holdout(filter_rows(rows))
    by_cell = {(r.concurrency, r.max_tokens): r for r in holdout.rows}
    # Check rows: predicted from the other rows through the chain.
    assert by_cell[(4, 200)].predicted_tps == pytest.approx(170.0 * 37.0 / 50.0)
    assert by_cell[(2, 200)].predicted_tps == pytest.approx(96.0 * 37.0 / 50.0)
    # The anchor of K(200) moves to c=2 without the c=1 row.
    assert by_cell[(1, 200)].predicted_tps == pytest.approx(74.0 / 96.0 * 50.0)
    # Without the base point or an f row, the chain has no prediction.
    assert by_cell[(1, 50)].predicted_tps is None and by_cell[(2, 50)].predicted_tps is None
    assert holdout.missing_rows == 3 and holdout.predicted_rows == 3


def test_verdict_is_judged_on_hold_out():
    rng = np.random.default_rng(6)
    clean = lsq.least_squares_analysis(filter_rows(simulate(full(), repeats=2, sigma=0.01, rng=rng)))
    assert clean.holdout.verdict == "excellent" and clean.holdout.mape_pct < 2
    noisy = lsq.least_squares_analysis(filter_rows(simulate(full(), repeats=1, sigma=0.25, rng=rng)))
    assert noisy.holdout.verdict == "fail"
    report = clean.report()
    for key in ("loo_mape_pct", "loo_max_pct", "intervals", "method", "chain_holdout", "separable"):
        assert key in report
    assert report["method"] == "lsq"
    assert report["intervals"]["f(4)"][0] < report["coefficients"]["f(4)"] < report["intervals"]["f(4)"][1]


# ---------------------------------------------------------------------------
# Is the model separable?
# ---------------------------------------------------------------------------

def test_planted_concurrency_by_length_interaction_is_found_and_located():
    rng = np.random.default_rng(7)
    rows = simulate(full(), repeats=5, sigma=0.03, rng=rng,
                    effect=lambda m, c, length: 1.4 if (c, length) == (8, 200) else 1.0)
    check = lsq.interaction_check(lsq.fit(filter_rows(rows)), filter_rows(rows))
    assert check.testable and not check.separable
    assert [(c.kind, c.concurrency, c.max_tokens) for c in check.broken] == [("concurrency x max_tokens", 8, 200)]
    assert check.broken[0].effect_pct > 10
    assert "c=8, max_tokens=200" in check.summary()


def test_planted_model_by_concurrency_interaction_is_found():
    rng = np.random.default_rng(8)
    # Three models: with two, a cell's interaction shows as an equal and opposite residual in
    # the other model's cell, and cannot be attributed to either.
    rows = simulate(full(models=tuple(C), concurrency=(1, 2, 4, 8)), repeats=4, sigma=0.03, rng=rng,
                    effect=lambda m, c, length: 0.75 if (m, c) == ("Beta", 4) else 1.0)
    check = lsq.interaction_check(lsq.fit(filter_rows(rows)), filter_rows(rows))
    located = [(c.kind, c.model, c.concurrency) for c in check.broken if c.kind == "model x concurrency"]
    assert located == [("model x concurrency", "Beta", 4)]


def test_no_false_alarm_on_separable_data():
    rng = np.random.default_rng(9)
    for _ in range(5):
        rows = simulate(full(models=("Alpha", "Beta")), repeats=3, sigma=0.05, rng=rng)
        check = lsq.interaction_check(lsq.fit(filter_rows(rows)), filter_rows(rows))
        assert check.separable, check.summary()


def test_rate_limit_plateau_is_detected():
    rng = np.random.default_rng(10)
    rows = simulate(full(), repeats=3, sigma=0.02, rng=rng,
                    effect=lambda m, c, length: F[8] / F[16] if (c, length) == (16, 200) else 1.0)
    statuses = filter_rows(rows)
    check = lsq.interaction_check(lsq.fit(statuses), statuses)
    assert [(p.max_tokens, p.concurrency_from, p.concurrency_to) for p in check.plateaus] == [(200, 8, 16)]
    assert check.plateaus[0].f_growth_pct > 10
    assert not check.separable and "flat" in check.summary()


def test_interaction_not_testable_without_residual_dof():
    statuses = filter_rows(read_results(ARTICLE).rows)
    check = lsq.interaction_check(lsq.fit(statuses), statuses)
    assert not check.testable and "not testable" in check.summary()
    assert lsq.least_squares_analysis(statuses).report()["separable"] is None


def test_report_of_an_aliased_design_agrees_with_the_workbook():
    """The workbook's least-squares sheet gives no fit for aliased designs; the JSON says the same."""
    rows = [make_row("A1", "Alpha", 1, 50, 50), make_row("A2", "Alpha", 2, 50, 95),
            make_row("A3", "Alpha", 4, 50, 175), make_row("A4", "Alpha", 2, 50, 96),
            make_row("B1", "Beta", 2, 100, 50), make_row("B2", "Beta", 4, 100, 90)]
    report = lsq.least_squares_analysis(filter_rows(rows)).report()
    assert report["aliased"] is True
    assert report["verdict"] == "insufficient"
    assert report["loo_mape_pct"] is None and report["loo_rows"] == 0


def _brute_chain_holdout(statuses, settings):
    """Leave-one-out by definition: recalibrate without each included row (base levels pinned)."""
    import dataclasses as dc

    from scm_xl.model import predict

    full = calibrate(statuses, settings)
    pinned = dc.replace(settings, base_model=full.base_model, base_max_tokens=full.base_max_tokens,
                        base_concurrency=full.base_concurrency)
    out = []
    for i, s in enumerate(statuses):
        if s.included:
            without = [o for j, o in enumerate(statuses) if j != i]
            out.append(predict(calibrate(without, pinned), s.concurrency, s.max_tokens, s.model).tps)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_closed_form_chain_holdout_equals_recalibrating_without_each_row(seed: int) -> None:
    """Random designs with replicates, sole rows, faults, overrides, case-differing models and level slots."""
    import random

    rng = random.Random(seed)
    models = ["Alpha", "beta", "BETA", "Gamma"][:rng.randint(1, 4)]
    rows = []
    for k in range(rng.randint(1, 30)):
        c, length = rng.choice([1, 2, 4, 8]), rng.choice([50, 100, 200])
        rows.append(make_row(f"E{k}", rng.choice(models), c, length, rng.uniform(20, 200),
                             failed_requests=1 if rng.random() < 0.05 else 0,
                             override=rng.choice([None, None, None, "include", "exclude"])))
    settings = Settings(concurrency_slots=rng.choice([None, 2, 3]), length_slots=rng.choice([None, 1, 2]),
                        model_slots=rng.choice([None, 1, 2]), base_concurrency=rng.choice([None, None, 2]))
    statuses = filter_rows(rows, settings)
    fast = [r.predicted_tps for r in lsq.chain_holdout(statuses, settings).rows]
    slow = _brute_chain_holdout(statuses, settings)
    assert [p is None for p in fast] == [p is None for p in slow]
    assert [p for p in fast if p is not None] == pytest.approx([p for p in slow if p is not None], rel=1e-12)


def test_chain_holdout_does_not_recalibrate_per_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI must stay linear in rows: leave-one-out may not recalibrate once per row."""
    calls = []
    real = lsq.calibrate
    monkeypatch.setattr(lsq, "calibrate", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(3)
    rows = simulate(full(models=("Alpha", "Beta")), repeats=3, sigma=0.05, rng=rng)
    statuses = filter_rows(rows)
    holdout = lsq.chain_holdout(statuses)
    assert holdout.predicted_rows > 50
    assert len(calls) <= 1
