"""A provider's rate limits, read from the wire: the headers' spelling, the simulator's limiter
(OpenAI's headers and 429s), and the collector recording them per experiment, end to end on
127.0.0.1 (issue 19: `--rpm 600 --tpm 30000`)."""

from __future__ import annotations

import pytest

from scm_xl.collect.ratelimit import RateLimitSeen, parse_duration, read_headers
from scm_xl.results import read_results
from scm_xl.simulator import RateLimiter, SimConfig, running_simulator
from support.servers import collect


@pytest.mark.parametrize("text,seconds", [("6m0s", 360.0), ("1s", 1.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5),
                                          ("0.5", 0.5), ("17", 17.0), ("soon", None), ("-3", None), ("1x", None)])
def test_reset_durations_as_openai_spells_them(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_the_headers_a_response_carries_and_an_experiments_fold() -> None:
    first = read_headers({"X-RateLimit-Limit-Requests": "600", "x-ratelimit-remaining-requests": "599",
                          "x-ratelimit-reset-requests": "100ms", "x-ratelimit-reset-tokens": "2s",
                          "x-ratelimit-limit-tokens": "lots", "Retry-After": "3"})
    assert first == {"ratelimit_limit_requests": 600, "ratelimit_remaining_requests": 599,
                     "ratelimit_reset_s": 2.0, "retry_after_s": 3.0}  # "lots" is not guessed
    seen = RateLimitSeen()
    seen.add(first)
    seen.add({"ratelimit_limit_requests": 500, "ratelimit_remaining_requests": 650, "ratelimit_reset_s": 1.0})
    assert seen.columns() == {"ratelimit_limit_requests": 500, "ratelimit_limit_tokens": None,
                              "ratelimit_remaining_requests": 599, "ratelimit_remaining_tokens": None,
                              "ratelimit_reset_s": 2.0, "retry_after_s": 3.0}
    assert read_headers({"content-type": "text/event-stream"}) == {}


def test_the_limiter_admits_within_the_minute_and_says_when_to_retry() -> None:
    limiter = RateLimiter(rpm=3, tpm=1000)
    answers = [limiter.admit(t, 100) for t in (0.0, 10.0, 20.0)]
    assert [ok for ok, _, _ in answers] == [True, True, True]
    assert answers[-1][1]["x-ratelimit-remaining-requests"] == "0"
    assert answers[-1][1]["x-ratelimit-remaining-tokens"] == "700"
    ok, headers, why = limiter.admit(30.0, 100)
    assert not ok and "3 requests per minute" in why and headers["retry-after"] == "30"  # the first leaves at 60
    assert limiter.admit(60.5, 100)[0]  # it left
    ok, headers, why = RateLimiter(rpm=0, tpm=250).admit(0.0, 300)
    assert not ok and "request too large" in why and "x-ratelimit-limit-requests" not in headers
    tokens = RateLimiter(rpm=0, tpm=250)
    assert tokens.admit(0.0, 200)[0] and tokens.admit(5.0, 40)[0]
    ok, headers, _ = tokens.admit(6.0, 100)
    assert not ok and headers["retry-after"] == "54" and headers["x-ratelimit-remaining-tokens"] == "10"


def test_the_collector_records_the_providers_limits(tmp_path) -> None:
    fast = SimConfig.zero_delay(rpm=600, tpm=30000)
    with running_simulator(fast) as url:
        collect(tmp_path, url, concurrency=(1, 2), max_tokens=(4,), requests_per_slot=2)
    rows = read_results(tmp_path / "results.csv").rows
    assert [r.ratelimit_limit_requests for r in rows] == [600, 600]
    assert [r.ratelimit_limit_tokens for r in rows] == [30000, 30000]
    # every admitted request (pre-flight and warm-up included) used one request and prompt + 4 tokens
    assert rows[1].ratelimit_remaining_requests < rows[0].ratelimit_remaining_requests < 600
    assert rows[1].ratelimit_remaining_tokens < rows[0].ratelimit_remaining_tokens < 30000
    assert all(r.rate_limited_requests == 0 and r.retry_after_s is None for r in rows)
    assert all(0 < r.ratelimit_reset_s <= 60 for r in rows)


def test_a_limit_reached_is_recorded_with_its_retry_after(tmp_path) -> None:
    with running_simulator(SimConfig.zero_delay(rpm=4)) as url:
        collect(tmp_path, url, concurrency=(2,), max_tokens=(4,), requests_per_slot=3, max_retries=0)
    row, = read_results(tmp_path / "results.csv").rows
    assert row.rate_limited_requests > 0 and row.ratelimit_limit_requests == 4
    assert row.ratelimit_remaining_requests == 0 and 1 <= row.retry_after_s <= 60


def test_solve_under_an_slo_is_limit_bound_with_the_providers_limits_and_server_bound_without(tmp_path) -> None:
    from click.testing import CliRunner

    from scm_xl.cli import main

    fast = SimConfig(step_base_s=0.001, step_per_seq_s=0.0, prefill_s_per_token=0.0, rpm=600, tpm=30000, seed=3)
    with running_simulator(fast) as url:
        collect(tmp_path, url, models=("sim",), concurrency=(1, 4), max_tokens=(8,), requests_per_slot=6)
    results = tmp_path / "results.csv"
    rows = read_results(results).rows
    assert {(r.ratelimit_limit_requests, r.ratelimit_limit_tokens) for r in rows} == {(600, 30000)}

    def solve(*extra: str):
        result = CliRunner().invoke(main, ["solve", str(results), "--target-tps", "100", "--slo", "e2el=5",
                                           "--attainment", "0.5", *extra])
        return result.exit_code, " ".join(result.output.split())

    # the provider's own limits, read from the headers the collector recorded: 600 requests of 8 tokens a
    # minute (90% of it used) let 72 tok/s through, so no deployment serves 100
    code, said = solve()
    assert code == 1 and "limit-bound: rate limits RPM 600, TPM 30000 (the provider's headers" in said
    assert "the rate limits rule out" in said and "requests per minute over the rate limit" in said
    assert "the rate limits let at most 72.0 output tok/s through" in said
    code, said = solve("--rpm", "1e9", "--tpm", "1e12")  # lifted
    assert code == 0 and "server-bound" in said and "rule out" not in said
    code, said = solve("--rpm", "1e9", "--tpm", "1e12", "--gpu-hour-price", "3.6", "--gpus", "2")
    assert "per million output tokens" in said


def test_solve_says_when_there_is_no_per_request_csv(tmp_path) -> None:
    from click.testing import CliRunner

    from scm_xl.cli import main

    with running_simulator(SimConfig.zero_delay()) as url:
        collect(tmp_path, url, models=("sim",), concurrency=(1, 2), max_tokens=(8,), requests_per_slot=2)
    (tmp_path / "requests.csv").unlink()
    result = CliRunner().invoke(main, ["solve", str(tmp_path / "results.csv"), "--target-tps", "1",
                                       "--slo", "e2el=5,tpot=0.1"])
    said = " ".join(result.output.split())
    assert "answering with the per-experiment P95s instead" in said and "tpot has no per-experiment figure" in said
    assert CliRunner().invoke(main, ["solve", str(tmp_path / "results.csv"), "--target-tps", "1",
                                     "--rpm", "5"]).exit_code == 2


def test_solve_slo_refusals_name_the_options_and_the_measured_levels(tmp_path) -> None:
    from click.testing import CliRunner

    from scm_xl.cli import main

    with running_simulator(SimConfig.zero_delay()) as url:
        collect(tmp_path, url, models=("sim",), concurrency=(1, 2), max_tokens=(8,), requests_per_slot=2)
    results = str(tmp_path / "results.csv")

    def said(*extra: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, ["solve", results, "--target-tps", "1", "--slo", "e2el=5", *extra])
        return result.exit_code, " ".join(result.output.split())

    assert said("--price-in", "1") == (2, "Error: token pricing needs both --price-in and --price-out "
                                          "(per million tokens)")
    code, text = said("--minimise", "cost")
    assert code == 2 and "--minimise cost needs a price" in text
    code, text = said("--model", "other")
    assert code == 2 and "'other' was not measured (measured: sim)" in text
    code, text = said("--prompt-tokens", "500")
    assert code == 2 and "measured prompt levels are none" in text
    code, text = said("--rpm", "1e12", "--attainment", "0.3")  # one limit given; the provider sent none
    assert code == 0 and "rate limits RPM 1e+12 (given" in text
    (tmp_path / "requests.csv").unlink()
    code, text = said("--price-in", "1", "--price-out", "2")
    assert code == 2 and "need the per-request CSV" in text
