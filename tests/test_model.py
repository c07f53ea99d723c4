"""The Python reference (scm_xl.model): filter, calibrate, check, verdict, predict, solve."""

from __future__ import annotations

import dataclasses
import math

import pytest
from data.gen import (
    BASE_TPS, FAILED, MANUAL_EXCLUDE, MANUAL_INCLUDE, MONOTONIC, RATE_LIMITED, TRUE_C, TRUE_F, TRUE_K,
    experiment, full_factorial, sparse_design, true_tps, with_exclusions,
)

from scm_xl.model import Analysis, RowCheck, Settings, analyze, predict, solve, verdict_for
from scm_xl.results import ResultRow, read_results

from support.paths import ARTICLE

MONOTONIC_REASON = "excluded: TPS falls as concurrency rises"


@pytest.fixture(scope="module")
def article_rows() -> list[ResultRow]:
    return read_results(ARTICLE).rows


@pytest.fixture(scope="module")
def article(article_rows: list[ResultRow]) -> Analysis:
    return analyze(article_rows)


def row_of(analysis: Analysis, exp_id: str) -> RowCheck:
    return next(check for check in analysis.checks if check.status.exp_id == exp_id)


def with_override(rows: list[ResultRow], exp_id: str, override: str) -> list[ResultRow]:
    return [dataclasses.replace(r, override=override) if r.exp_id == exp_id else r for r in rows]


# --- the article's table ------------------------------------------------------

def test_article_coefficients(article: Analysis) -> None:
    cal = article.calibration
    assert (cal.base_model, cal.base_max_tokens, cal.base_concurrency, cal.base_rows) == ("Qwen2.5-7B", 50, 1, 1)
    assert round(cal.base_tps, 2) == 45.45
    assert round(cal.f(1), 2) == 1.00
    assert round(cal.f(2), 2) == 2.62
    assert round(cal.f(4), 2) == 3.10
    assert round(cal.k_len(50), 2) == 1.00
    assert round(cal.k_len(100), 2) == 0.50
    assert cal.anchor(100) == 2  # concurrency 1 was not measured at max_tokens 100
    assert cal.f(8) is None  # E07 is the only row at concurrency 8
    assert cal.c_model("Qwen2.5-7B") == 1.0


def test_article_forward_and_inverse(article: Analysis) -> None:
    assert round(predict(article.calibration, 2, 100).tps, 2) == 59.52
    solution = solve(article.calibration, 100, 50)
    assert solution.reachable
    assert solution.concurrency == 2
    assert round(solution.tps, 2) == 119.05


def test_article_filter_and_roles(article: Analysis) -> None:
    e06 = row_of(article, "E06")
    assert not e06.status.included
    assert e06.role == "excluded"
    assert e06.status.reason_code == "mono"
    assert e06.status.monotonic_violation
    assert e06.status.faster_lower_tps == pytest.approx(50 / 0.81)  # E05: concurrency 1, same length, faster
    assert e06.status.reason("en").startswith(MONOTONIC_REASON)
    assert "a lower-concurrency row of the same model and max_tokens is faster" in e06.status.reason("en")

    e07 = row_of(article, "E07")
    assert e07.status.included
    assert e07.role == "unidentified"
    assert e07.missing == ("f(8)",)
    assert e07.predicted_tps is None
    assert e07.note("en") == "missing f(8)"

    roles = {check.status.exp_id: check.role for check in article.checks}
    assert roles == {"E01": "identify", "E02": "identify", "E03": "identify", "E04": "identify",
                     "E05": "identify", "E06": "excluded", "E07": "unidentified"}
    for exp_id in ("E01", "E02", "E03", "E04", "E05"):
        assert row_of(article, exp_id).deviation_pct == pytest.approx(0, abs=1e-9)
    assert row_of(article, "E01").identifies == ("BaseTPS",)
    assert row_of(article, "E04").identifies == ("K_len(100)",)


def test_article_has_no_check_rows_so_verdict_is_insufficient(article: Analysis) -> None:
    c = article.consistency
    assert (c.check_rows, c.identify_rows, c.unidentified_rows, c.excluded_rows) == (0, 5, 1, 1)
    assert c.mape_pct is None and c.max_deviation_pct is None
    assert c.verdict == "insufficient"


def test_article_forcing_e06_in_makes_it_a_failing_check_row(article_rows: list[ResultRow]) -> None:
    analysis = analyze(with_override(article_rows, "E06", "include"))
    e06 = row_of(analysis, "E06")
    assert e06.status.included
    assert e06.status.reason_code == "manual_include"
    assert e06.role == "check"
    expected = analysis.calibration.base_tps * analysis.calibration.f(4) * analysis.calibration.k_len(200)
    assert e06.predicted_tps == pytest.approx(expected)
    assert e06.deviation_pct < -300  # measured 45.87, predicted about 191
    c = analysis.consistency
    assert c.check_rows == 1
    assert c.mape_pct == pytest.approx(abs(e06.deviation_pct))
    assert c.verdict == "fail"


# --- roles and replicates on designed data ----------------------------------------

def test_full_factorial_roles() -> None:
    analysis = analyze(full_factorial(seed=11, replicates=False))
    roles = [check.role for check in analysis.checks]
    # base point, 3 more f(c), 2 more K_len(L), 1 C_model(model-b); everything else checks them
    assert roles.count("identify") == 7
    assert roles.count("check") == 24 - 7
    assert analysis.consistency.check_rows == 17
    for check in analysis.checks:
        assert check.predicted_tps is not None
        if check.role == "identify":
            assert check.deviation_pct == pytest.approx(0, abs=1e-9)
            assert check.identifies
    assert analysis.consistency.verdict in ("excellent", "good")


def test_noiseless_factorial_recovers_the_truth() -> None:
    analysis = analyze(full_factorial(sigma=0.0))
    cal = analysis.calibration
    assert cal.base_tps == pytest.approx(BASE_TPS, rel=1e-6)
    for c, f in TRUE_F.items():
        assert cal.f(c) == pytest.approx(f, rel=1e-6)
    for length, k in TRUE_K.items():
        assert cal.k_len(length) == pytest.approx(k, rel=1e-6)
    for model, cost in TRUE_C.items():
        assert cal.c_model(model) == pytest.approx(cost, rel=1e-6)
    assert analysis.consistency.max_deviation_pct == pytest.approx(0, abs=1e-4)
    assert analysis.consistency.verdict == "excellent"


def test_sparse_design_has_exactly_the_off_axis_points_as_check_rows() -> None:
    analysis = analyze(sparse_design())
    checks = [(c.status.model, c.status.concurrency, c.status.max_tokens)
              for c in analysis.checks if c.role == "check"]
    assert checks == [("model-a", 4, 200), ("model-a", 8, 100), ("model-b", 2, 100), ("model-b", 8, 200)]


def test_replicates_combine_by_geometric_mean() -> None:
    rows = [
        experiment("B1", "m", 1, 50, 40.0),
        experiment("B2", "m", 1, 50, 90.0),
        experiment("F1", "m", 2, 50, 250.0),
        experiment("F2", "m", 2, 50, 160.0),
    ]
    cal = analyze(rows).calibration
    assert cal.base_rows == 2
    assert cal.base_tps == pytest.approx(60.0, rel=1e-6)  # sqrt(40 x 90), not the mean 65
    assert cal.f(2) == pytest.approx(200.0 / 60.0, rel=1e-6)  # sqrt(250 x 160) / 60
    assert cal.concurrency_levels[1].rows == 2


# --- the physical filter and overrides ---------------------------------------------

def test_failed_and_rate_limited_rows_are_excluded_with_reason() -> None:
    analysis = analyze(with_exclusions())
    for exp_id in (FAILED, RATE_LIMITED):
        check = row_of(analysis, exp_id)
        assert not check.status.included
        assert check.role == "excluded"
        assert check.status.reason("en") == "excluded: failed or rate-limited requests"
        assert check.status.reason("zh") == "剔除：存在失败或限流请求"
    mono = row_of(analysis, MONOTONIC)
    assert mono.status.reason("en").startswith(MONOTONIC_REASON)
    # only concurrency 1 counts: the faulty rows at 2 and 4 are not eligible witnesses
    witness = row_of(analysis, "X02")  # concurrency 1, max_tokens 100
    assert mono.status.monotonic_violation
    assert mono.status.faster_lower_tps == pytest.approx(witness.status.tps)
    assert analysis.consistency.excluded_rows == 4


def test_manual_override_wins_over_the_filter() -> None:
    analysis = analyze(with_exclusions())
    forced_out = row_of(analysis, MANUAL_EXCLUDE)
    assert not forced_out.status.included
    assert forced_out.status.reason("en") == "excluded: manual override"
    forced_in = row_of(analysis, MANUAL_INCLUDE)  # it had a failed request
    assert forced_in.status.fault
    assert forced_in.status.included
    assert forced_in.status.reason("en") == "included: manual override"
    assert forced_in.role == "check"


def test_manual_exclude_of_the_base_point_moves_it() -> None:
    rows = [experiment("A", "m", 1, 50, 40.0), experiment("B", "m", 2, 50, 70.0),
            experiment("C", "m", 4, 50, 100.0)]
    analysis = analyze(with_override(rows, "A", "exclude"))
    assert analysis.calibration.base_concurrency == 2
    assert analysis.calibration.base_tps == pytest.approx(70.0, rel=1e-6)


# --- settings -------------------------------------------------------------------

def test_base_concurrency_override(article_rows: list[ResultRow]) -> None:
    cal = analyze(article_rows, Settings(base_concurrency=2)).calibration
    assert cal.base_concurrency == 2
    assert cal.base_tps == pytest.approx(50 / 0.42)
    assert cal.f(2) == pytest.approx(1.0)
    assert cal.f(1) == pytest.approx((25 / 0.55) / (50 / 0.42))


def test_base_max_tokens_override() -> None:
    rows = full_factorial(sigma=0.0)
    cal = analyze(rows, Settings(base_max_tokens=100)).calibration
    assert cal.base_max_tokens == 100
    assert cal.base_tps == pytest.approx(true_tps(1, 100, "model-a"), rel=1e-6)
    assert cal.k_len(100) == pytest.approx(1.0)
    assert cal.k_len(50) == pytest.approx(TRUE_K[50] / TRUE_K[100], rel=1e-6)


def test_base_model_override() -> None:
    cal = analyze(full_factorial(sigma=0.0), Settings(base_model="model-b")).calibration
    assert cal.base_model == "model-b"
    assert cal.base_tps == pytest.approx(true_tps(1, 50, "model-b"), rel=1e-6)
    assert cal.c_model("model-b") == pytest.approx(1.0)
    assert cal.c_model("model-a") == pytest.approx(TRUE_C["model-a"] / TRUE_C["model-b"], rel=1e-6)


def test_default_base_length_prefers_50_else_the_smallest() -> None:
    rows = [experiment("A", "m", 1, 100, 30.0), experiment("B", "m", 1, 50, 40.0),
            experiment("C", "m", 1, 20, 50.0)]
    assert analyze(rows).calibration.base_max_tokens == 50
    assert analyze(rows[:1] + rows[2:]).calibration.base_max_tokens == 20


def test_monotonic_tolerance() -> None:
    rows = [experiment("A", "m", 1, 50, 100.0), experiment("B", "m", 2, 50, 97.0)]
    assert not analyze(rows).statuses[1].included
    assert analyze(rows, Settings(monotonic_tolerance_pct=5)).statuses[1].included


# --- several models ---------------------------------------------------------------

def test_model_cost_of_a_second_model() -> None:
    rows = [
        experiment("A1", "fast", 1, 50, 40.0),
        experiment("A2", "fast", 2, 50, 70.0),
        experiment("A3", "fast", 1, 100, 20.0),
        experiment("B1", "slow", 1, 50, 16.0),
        experiment("B2", "slow", 2, 100, 14.0),
    ]
    analysis = analyze(rows)
    cal = analysis.calibration
    assert cal.c_model("fast") == 1.0
    assert cal.c_model("slow") == pytest.approx(40.0 / 16.0)
    b1, b2 = row_of(analysis, "B1"), row_of(analysis, "B2")
    assert b1.role == "identify" and b1.identifies == ("C_model(slow)",)
    assert b2.role == "check"
    assert b2.predicted_tps == pytest.approx(40.0 * (70 / 40) * (20 / 40) / 2.5)  # 14.0: a perfect check
    assert analysis.consistency.verdict == "good"  # one check row: excellent needs three
    assert predict(cal, 2, 100, "slow").tps == pytest.approx(14.0)


def test_model_names_compare_case_insensitively() -> None:
    rows = [experiment("A", "Qwen", 1, 50, 40.0), experiment("B", "QWEN", 2, 50, 80.0),
            experiment("C", "qwen", 4, 50, 70.0)]
    analysis = analyze(rows)
    assert [m.model for m in analysis.calibration.models] == ["Qwen"]
    assert analysis.calibration.f(2) == pytest.approx(2.0)
    assert row_of(analysis, "C").status.reason_code == "mono"  # one model for the filter too
    assert predict(analysis.calibration, 2, 50, "qWeN").tps == pytest.approx(80.0)
    assert solve(analysis.calibration, 60, 50, "QWEN").concurrency == 2


# --- verdict ----------------------------------------------------------------------

@pytest.mark.parametrize(("mape", "max_dev", "n", "verdict"), [
    (0.0, 0.0, 1, "good"),  # excellent rests on EXCELLENT_MIN_ROWS (3) rows at least
    (0.0, 0.0, 2, "good"),
    (0.0, 0.0, 3, "excellent"),
    (5.0, 10.0, 3, "excellent"),
    (5.0 + 1e-9, 10.0, 3, "good"),
    (5.0, 10.0 + 1e-9, 3, "good"),
    (10.0, 20.0, 3, "good"),
    (10.0 + 1e-9, 20.0, 3, "fail"),
    (10.0, 20.0 + 1e-9, 3, "fail"),
    (1.0, 25.0, 3, "fail"),
    (250.0, 400.0, 1, "fail"),
    (None, None, 0, "insufficient"),
    (0.0, 0.0, 0, "insufficient"),
])
def test_verdict_thresholds(mape: float | None, max_dev: float | None, n: int, verdict: str) -> None:
    assert verdict_for(mape, max_dev, n) == verdict


def test_verdict_from_check_rows_only() -> None:
    """An identify row with a large own deviation (a replicate) does not enter the verdict."""
    rows = [
        experiment("B1", "m", 1, 50, 20.0), experiment("B2", "m", 1, 50, 80.0),  # base point: 40
        experiment("F2", "m", 2, 50, 80.0),
        experiment("K1", "m", 1, 100, 20.0),
        experiment("C1", "m", 2, 100, 41.0),  # predicted 40 x 2 x 0.5 = 40: check row, 2.44% off
    ]
    analysis = analyze(rows)
    assert abs(row_of(analysis, "B1").deviation_pct) > 50
    assert analysis.consistency.check_rows == 1
    assert analysis.consistency.mape_pct == pytest.approx(100 / 41)
    assert analysis.consistency.verdict == "good"  # one check row: excellent needs three


# --- forward and inverse ----------------------------------------------------------

def test_solve_unreachable(article: Analysis) -> None:
    solution = solve(article.calibration, 1000, 50)
    assert not solution.reachable
    assert solution.concurrency is None and solution.tps is None
    assert solution.best_concurrency == 4
    assert solution.best_tps == pytest.approx(100 / 0.71)
    assert [c for c, _ in solution.table] == [1, 2, 4, 8]
    assert solution.table[-1][1] is None  # f(8) unknown


def test_solve_picks_the_smallest_meeting_concurrency(article: Analysis) -> None:
    assert solve(article.calibration, 45, 50).concurrency == 1
    assert solve(article.calibration, 120, 50).concurrency == 4
    assert solve(article.calibration, 140, 50).concurrency == 4
    assert solve(article.calibration, 119, 100).concurrency is None  # K_len(100) halves it: at most 70


def test_predict_names_missing_coefficients(article: Analysis) -> None:
    prediction = predict(article.calibration, 8, 300, "Llama")
    assert prediction.tps is None
    assert prediction.missing == ("f(8)", "K_len(300)", "C_model(Llama)")
    assert predict(article.calibration, 2, 300).missing == ("K_len(300)",)
    assert predict(article.calibration, 3, 50).missing == ("f(3)",)


def test_predict_uses_all_three_coefficients() -> None:
    cal = analyze(full_factorial(sigma=0.0)).calibration
    for c in TRUE_F:
        for length in TRUE_K:
            for model in TRUE_C:
                assert predict(cal, c, length, model).tps == pytest.approx(true_tps(c, length, model), rel=1e-6)


def test_nothing_included_leaves_everything_unknown() -> None:
    rows = [experiment("A", "m", 1, 50, 40.0, failed_requests=1)]
    analysis = analyze(rows)
    assert analysis.calibration.base_tps is None
    assert analysis.consistency.verdict == "insufficient"
    assert predict(analysis.calibration, 1, 50, "m").tps is None
    assert not solve(analysis.calibration, 1, 50, "m").reachable
    assert math.isclose(analysis.statuses[0].tps, 40.0, rel_tol=1e-6)
