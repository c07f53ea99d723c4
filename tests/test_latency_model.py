"""The latency model against the simulator, where the truth is known: a slot limit of 6 and step
costs that grow with the batch and the context. Calibrated on concurrency 1-16 x two prompt
lengths x two output lengths, it must predict configurations it never saw (concurrency 3 and 12,
a prompt length between the two) and find the knee within one measured level of the slot limit."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from scm_xl.latency import latency_model
from scm_xl.results import write_results
from support.latency import MEASURED_CONCURRENCY, SLOTS, Sweep, measure


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list]:
    folder = tmp_path_factory.mktemp("latency")
    short, long, unseen_256, unseen_32 = measure(
        folder, Sweep("T", 32, MEASURED_CONCURRENCY, (16, 48)), Sweep("T", 512, MEASURED_CONCURRENCY, (16, 48)),
        Sweep("U", 256, (3, 12), (32,), repeats=3), Sweep("V", 32, (3, 12), (32,), repeats=3))
    train = short + long
    unseen = unseen_256 + unseen_32
    write_results(folder / "train.csv", train)
    return train, unseen


def test_the_knee_lands_within_one_measured_level_of_the_slot_limit(measured: tuple[list, list]) -> None:
    model = latency_model(measured[0])
    fit = model.fit_for("sim")
    assert fit is not None and fit.knee.kind == "limit"
    assert 4 <= fit.knee.concurrency <= 8  # the measured levels either side of the 6 slots
    assert "throughput stops growing near concurrency" in model.knee_text()


def test_unseen_concurrency_and_prompt_length_predicted_within_3_percent(measured: tuple[list, list]) -> None:
    train, unseen = measured
    model = latency_model(train)
    errors = []
    # Each unseen configuration is measured three times and compared by its median: on a loaded
    # machine one stall of the client (a closed loop sends its next request late, and that time is
    # lost) moved one run's TPS by 9% once in a full suite; the median of three is the measurement
    # a stall in one of them does not move.
    by_configuration: dict[tuple, list] = {}
    for row in unseen:
        by_configuration.setdefault((row.prompt_level, row.concurrency, row.max_tokens), []).append(row)
    assert len(by_configuration) == 4 and all(len(rows) == 3 for rows in by_configuration.values())
    for rows in by_configuration.values():
        row = rows[0]
        tps = statistics.median(r.tps for r in rows)
        ttft = statistics.median(r.ttft_mean_s for r in rows)
        # a run as long as the measured one: above the knee its queue is the finite run's, not a steady state's
        prompt = statistics.median(r.prompt_tokens for r in rows)
        forecast = model.forecast(row.concurrency, row.max_tokens, "sim", prompt, requests=row.total_requests)
        assert forecast.tps is not None and forecast.ttft_s is not None
        errors.append(abs(forecast.tps - tps) / tps * 100)
        # Below the knee TTFT is milliseconds (two decode steps) over 9 requests: event-loop timers on a
        # loaded machine (the suite runs two workers on two cores) move it by a quarter;
        # benchmarks/bench_latency_sim.py measures it within 3% on longer runs. Above the knee it is the
        # wait for a slot, hundreds of milliseconds, which the finite-run wait must get right (within
        # 12%: a busy machine stretched one such wait by 9%; the steady-state wait, without the finite
        # run's queue, is 18-21% off, against 0.5-2% for the finite run's on an idle machine)
        tolerance = 0.35 if row.concurrency <= SLOTS else 0.12
        assert abs(forecast.ttft_s - ttft) / ttft < tolerance, (row.exp_id, forecast)
        assert forecast.beyond_knee == (row.concurrency > fit_knee(model))
    assert sum(errors) / len(errors) < 3.0, errors


def fit_knee(model) -> float:
    fit = model.fit_for("sim")
    assert fit is not None and fit.knee_limit is not None
    return fit.knee_limit


def test_no_growth_predicted_past_the_knee(measured: tuple[list, list]) -> None:
    model = latency_model(measured[0])
    at_knee = model.forecast(fit_knee(model), 32, "sim", 256).tps
    beyond = [model.forecast(c, 32, "sim", 256).tps for c in (12, 24, 64)]
    assert at_knee is not None and all(t is not None and abs(t - at_knee) < 1e-6 * at_knee for t in beyond)


def test_the_holdout_and_littles_law(measured: tuple[list, list]) -> None:
    model = latency_model(measured[0])
    assert model.holdout.predicted_rows == len(measured[0])
    assert model.holdout.mape_pct is not None and model.holdout.mape_pct < 10
    assert model.report()["models"][0]["prompt_levels"] == [32.0, 512.0]


def test_a_prompt_length_changes_the_answer_on_every_method(measured: tuple[list, list], tmp_path: Path) -> None:
    import dataclasses
    import json

    from click.testing import CliRunner

    from scm_xl.cli import main

    path = tmp_path / "train.csv"
    write_results(path, measured[0])
    runner = CliRunner()

    def ask(*options: str) -> dict:
        result = runner.invoke(main, ["predict", str(path), "--concurrency", "4", "--max-tokens", "48", *options,
                                      "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    short, long = ask("--prompt-tokens", "32", "--method", "latency"), ask("--prompt-tokens", "400", "--method", "latency")
    assert long["tps"] < short["tps"] * 0.9 and long["ttft_s"] > short["ttft_s"]
    # chain and least squares answer between the measured prompt levels through K_in(P) (log-log)
    for method in ("chain", "lsq"):
        at_base, between = ask("--method", method), ask("--prompt-tokens", "400", "--method", method)
        assert between["tps"] < at_base["tps"], method
    auto = ask("--prompt-tokens", "400")
    assert auto["method_choice"]["why"].startswith("lowest leave-one-out error")
    # one plain prompt (no prompt levels): only the latency model could answer for another length
    plain = tmp_path / "plain.csv"
    write_results(plain, [dataclasses.replace(r, prompt_level=None) for r in measured[0] if r.prompt_level == 32])
    chain = runner.invoke(main, ["predict", str(plain), "--concurrency", "4", "--max-tokens", "48",
                                 "--prompt-tokens", "400", "--method", "chain"])
    assert chain.exit_code == 1 and "K_in is not identified" in chain.output
    # ... while a length within 5% of the recorded prompt is that prompt
    same = [json.loads(runner.invoke(main, ["predict", str(plain), "--concurrency", "4", "--max-tokens", "48",
                                            *extra, "--method", "chain", "--json"]).output)["tps"]
            for extra in ((), ("--prompt-tokens", "33"))]
    assert same[0] is not None and same[0] == same[1]


def test_rows_at_another_prompt_level_calibrate_k_in_in_the_chain(measured: tuple[list, list]) -> None:
    from scm_xl.model import analyze

    analysis = analyze(measured[0])
    assert analysis.base_prompt_level == 32
    at_512 = [s for s in analysis.statuses if s.prompt_level == 512]
    assert len(at_512) == len(MEASURED_CONCURRENCY) * 2
    assert sum(s.included for s in at_512) >= len(MEASURED_CONCURRENCY)  # only the monotonic filter excludes
    cal = analysis.calibration
    assert cal.prompt_anchor(512) == 1 and cal.k_in(512) is not None and cal.k_in(512) < 1
    (identifying,) = [c for c in analysis.checks if c.identifies == ("K_in(512)",)]
    assert identifying.status.exp_id.endswith("-P512") and identifying.status.max_tokens == cal.base_max_tokens


def _replayed_wait(clients: int, slots: int, requests: int) -> float:
    """Mean wait for a slot, in service times, by replaying a closed loop request by request: each
    request served for one time unit on the first free slot, first come first served; a client sends
    its next request when its last one ends, until `requests` have been sent."""
    import heapq

    free = [0.0] * slots  # when each slot is next free
    heapq.heapify(free)
    queue = [0.0] * min(clients, requests)  # send times, in order
    sent, waits = len(queue), []
    while queue:
        arrived = queue.pop(0)
        start = max(arrived, heapq.heappop(free))
        waits.append(start - arrived)
        heapq.heappush(free, start + 1.0)
        if sent < requests:
            queue.append(start + 1.0)
            queue.sort()
            sent += 1
    return sum(waits) / len(waits)


@pytest.mark.parametrize("clients,slots,requests", [(12, 6, 36), (16, 6, 48), (8, 6, 24), (7, 2, 70),
                                                    (9, 4, 9), (5, 4, 3), (40, 8, 1000)])
def test_the_finite_run_wait_equals_a_request_by_request_replay(clients: int, slots: int, requests: int) -> None:
    from scm_xl.latency import finite_wait

    assert finite_wait(clients, slots, requests) == pytest.approx(_replayed_wait(clients, slots, requests))
    assert finite_wait(clients, slots, 10**7) == pytest.approx(clients / slots - 1, rel=1e-4)  # the steady state
    assert finite_wait(slots, slots, requests) == 0.0


def test_a_run_too_short_to_queue_is_no_division_by_zero(measured: tuple[list, list]) -> None:
    """A row above the knee whose run had no more requests than slots expects no wait (W = 0): it
    says nothing of the queue share, and must not break the fit (a hand-typed row can be one)."""
    import dataclasses

    from scm_xl.latency import finite_wait

    assert finite_wait(8, 6, 5) == 0.0
    train = list(measured[0])
    above = next(r for r in train if r.concurrency > SLOTS)
    train.append(dataclasses.replace(above, exp_id="SHORT", total_requests=5, requests_per_slot=1, ok_requests=5,
                                     total_output_tokens=5 * above.max_tokens))
    fit = latency_model(train).fit_for("sim")
    assert fit is not None and fit.queue_share > 0
