"""Replicate summaries: median (as MEDIAN), CV, flags and the stability note."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scm_xl import lsq, replicates
from scm_xl.model import calibrate, filter_rows
from support.rows import make_row


def test_groups_by_cell_case_insensitively_in_order_of_appearance():
    rows = [make_row("E1", "Qwen", 1, 50, 40), make_row("E2", "qwen", 1, 50, 44),
            make_row("E3", "Qwen", 2, 50, 80), make_row("E4", "QWEN", 1, 50, 42)]
    cells = replicates.summarize(rows)
    assert [(c.model, c.concurrency, c.max_tokens, c.n) for c in cells] == [("Qwen", 1, 50, 3), ("Qwen", 2, 50, 1)]
    assert cells[0].exp_ids == ("E1", "E2", "E4")


def test_median_averages_the_two_middle_values_for_even_counts():
    rows = [make_row(f"E{i}", "m", 1, 50, tps) for i, tps in enumerate([10, 40, 20, 30])]
    (cell,) = replicates.summarize(rows)
    assert cell.median_tps == pytest.approx(25.0)
    rows.append(make_row("E9", "m", 1, 50, 100))
    (cell,) = replicates.summarize(rows)
    assert cell.median_tps == pytest.approx(30.0)


def test_cv_is_sample_std_over_mean_and_none_for_one_row():
    values = [100.0, 90.0, 120.0, 105.0]
    rows = [make_row(f"E{i}", "m", 4, 100, v) for i, v in enumerate(values)]
    (cell,) = replicates.summarize(rows)
    assert cell.cv == pytest.approx(np.std(values, ddof=1) / np.mean(values))
    assert cell.mean_tps == pytest.approx(np.mean(values))
    (single,) = replicates.summarize(rows[:1])
    assert single.cv is None and not single.flagged
    assert single.repeats_needed is None and single.more_repeats is None
    assert "repeat it" in single.note()


def test_flag_and_stability_note():
    # CV = 0.2 with a 10% threshold: ceil((1.645 x 0.2 / 0.1)^2) = ceil(10.82) = 11 runs.
    mean, spread = 100.0, 20.0
    values = [mean - spread * math.sqrt(2) / 2 * math.sqrt(2), mean, mean + spread]  # std 20
    rows = [make_row(f"E{i}", "m", 2, 50, v) for i, v in enumerate(values)]
    (cell,) = replicates.summarize(rows)
    assert cell.cv == pytest.approx(0.2)
    assert cell.flagged
    assert cell.repeats_needed == 11 and cell.more_repeats == 8
    assert "8 more runs (11 in all)" in cell.note() and "above 10%" in cell.note()


def test_stable_cell_needs_no_more_runs():
    rows = [make_row(f"E{i}", "m", 2, 50, v) for i, v in enumerate([99.0, 100.0, 101.0])]
    (cell,) = replicates.summarize(rows)
    assert not cell.flagged and cell.more_repeats == 0 and cell.repeats_needed == 2
    assert "stable with 3 runs" in cell.note()


def test_threshold_is_adjustable_and_validated():
    rows = [make_row(f"E{i}", "m", 2, 50, v) for i, v in enumerate([90.0, 100.0, 110.0])]
    (cell,) = replicates.summarize(rows, cv_threshold=0.05)
    assert cell.flagged and cell.repeats_needed == math.ceil((replicates.Z_90 * 0.1 / 0.05) ** 2)
    with pytest.raises(ValueError):
        replicates.summarize(rows, cv_threshold=0)


def test_median_statuses_feed_the_calibration():
    rows = [make_row("A1", "m", 1, 50, 40), make_row("A2", "m", 1, 50, 50), make_row("A3", "m", 1, 50, 45),
            make_row("B1", "m", 2, 50, 80), make_row("B2", "m", 2, 50, 100),
            make_row("X1", "m", 4, 50, 10)]  # excluded by the monotonic filter
    statuses = filter_rows(rows)
    medians = replicates.median_statuses(statuses)
    assert [(s.exp_id, s.concurrency, s.tps) for s in medians] == [("A1", 1, 45.0), ("B1", 2, 90.0)]
    assert calibrate(medians).f(2) == pytest.approx(2.0)
    assert lsq.fit(medians).calibration.f(2) == pytest.approx(2.0)
