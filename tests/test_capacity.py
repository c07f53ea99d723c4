"""Replicas and cost under an SLO (scm_xl/capacity.py), with figures computed by hand: replicas
for a target, cost per million output tokens under both pricings, the deployment's RPM and TPM
against rate limits with both verdicts (server-bound, limit-bound), and minimise="cost"."""

from __future__ import annotations

from pathlib import Path

import pytest

from scm_xl.capacity import (
    COST_UNKNOWN, LIMIT_BOUND, RATE_LIMIT_HEADROOM, RPM_LIMIT, SERVER_BOUND, TPM_LIMIT, Pricing, RateLimits, plan,
    replicas_for,
)
from scm_xl.errors import UsageError
from scm_xl.goodput import E2EL, FAILED, TTFT, ExperimentGoodput, Slo, Tally, evaluate, read_samples, select_cells
from support.goodput import HAND, result_row, write_requests

SLO = Slo(ttft_s=1.0, e2el_s=10.0)  # attainment 0.95: 100 good of 100 has a Wilson lower bound of 0.963


def experiment(exp_id: str, concurrency: int, max_tokens: int, tps: float, latency_s: float,
               prompt_tokens: int | None = 200, requests: int = 100) -> ExperimentGoodput:
    """`requests` all good, each `max_tokens` long, taking `latency_s`, at `tps` in all."""
    tokens = requests * max_tokens
    prompts = (requests * prompt_tokens, requests) if prompt_tokens is not None else (0, 0)
    return ExperimentGoodput(exp_id=exp_id, model="m", concurrency=concurrency, max_tokens=max_tokens,
                             prompt_level=None, repeat=1,
                             tally=Tally(requests, requests, tokens, tokens, tokens / tps,
                                         ((TTFT, 0), (E2EL, 0), (FAILED, 0)), latency_s * requests, requests,
                                         *prompts))


# A: concurrency 4, 100-token answers, 600 TPS a replica, 2.0 s a request.
# B: concurrency 8, 400-token answers, 500 TPS a replica, 6.4 s a request. Both prompts 200 tokens.
A = experiment("A", 4, 100, 600.0, 2.0)
B = experiment("B", 8, 400, 500.0, 6.4)
TARGET = 1000.0


def cells(*experiments: ExperimentGoodput, slo: Slo = SLO):
    return select_cells(list(experiments), slo)


def test_replicas_are_the_ceiling_without_float_noise() -> None:
    assert replicas_for(1000, 300) == 4
    assert replicas_for(900, 300) == 3
    assert replicas_for(3, 0.3) == 10  # 3 / 0.3 = 10.000000000000002
    assert replicas_for(1, 1000) == 1


def test_token_pricing_by_hand() -> None:
    result = plan(cells(A, B), TARGET, SLO, pricing=Pricing(price_in=0.5, price_out=1.5))
    chosen = result.chosen
    assert chosen is not None and chosen.cell.exp_ids == ("A",) and result.bound == SERVER_BOUND
    assert chosen.replicas == 2 and chosen.capacity_tps == 1200  # ceil(1000 / 600)
    assert chosen.input_per_output == 2.0  # 200 prompt tokens per 100 output tokens
    assert chosen.cost_per_million_output == pytest.approx(0.5 * 2 + 1.5)  # 2.5
    assert chosen.cost_per_hour == pytest.approx(1000 * 3600 / 1e6 * 2.5)  # 9.0 for 3.6M tokens an hour
    other = next(o for o in result.options if o.cell.exp_ids == ("B",))
    assert other.cost_per_million_output == pytest.approx(0.5 * (200 / 400) + 1.5)  # 1.75


def test_gpu_pricing_by_hand() -> None:
    result = plan(cells(A, B), TARGET, SLO, pricing=Pricing(gpu_hour_price=3.6, gpus=2))
    figures = {o.cell.exp_ids[0]: (o.replicas, o.cost_per_million_output, o.cost_per_hour) for o in result.options}
    assert figures["A"] == pytest.approx((2, 2 * 3.6 / (600 * 3600) * 1e6, 2 * 2 * 3.6))  # 3.333 per 1M, 14.4/h
    assert figures["B"] == pytest.approx((2, 2 * 3.6 / (500 * 3600) * 1e6, 2 * 2 * 3.6))  # 4.0 per 1M, 14.4/h


def test_minimise_cost_chooses_by_cost_instead_of_concurrency() -> None:
    tokens = Pricing(price_in=0.5, price_out=1.5)
    slots = plan(cells(A, B), TARGET, SLO, pricing=tokens).chosen
    assert slots is not None and slots.cell.exp_ids == ("A",)
    cheapest = plan(cells(A, B), TARGET, SLO, pricing=tokens, minimise="cost").chosen
    assert cheapest is not None and cheapest.cell.exp_ids == ("B",)  # 1.75 per 1M against 2.5
    # GPU pricing pays for whole replicas: C (concurrency 8, 700 TPS) and A both need 2 replicas,
    # 14.4 an hour; per 1M output tokens C costs 7.2 / (700 x 3600) x 1e6 = 2.857, A 3.333.
    c = experiment("C", 8, 100, 700.0, 1.0)
    gpu = Pricing(gpu_hour_price=3.6, gpus=2)
    by_slots = plan(cells(A, c), TARGET, SLO, pricing=gpu).chosen
    by_cost = plan(cells(A, c), TARGET, SLO, pricing=gpu, minimise="cost").chosen
    assert by_slots is not None and by_slots.cell.exp_ids == ("A",)
    assert by_cost is not None and by_cost.cell.exp_ids == ("C",)
    assert by_cost.cost_per_million_output == pytest.approx(2 * 3.6 / (700 * 3600) * 1e6)
    with pytest.raises(UsageError, match="needs a price"):
        plan(cells(A), TARGET, SLO, minimise="cost")
    with pytest.raises(UsageError, match="minimise must be one of"):
        plan(cells(A), TARGET, SLO, minimise="gpus")


def test_rate_limits_by_hand_and_both_verdicts() -> None:
    # A: 2 replicas x 60 x 4 slots / 2.0 s = 240 RPM; TPM 240 x (200 + 100) = 72,000.
    # B: 2 replicas x 60 x 8 slots / 6.4 s = 150 RPM; TPM 150 x (200 + 400) = 90,000.
    assert RATE_LIMIT_HEADROOM == 0.9
    free = plan(cells(A, B), TARGET, SLO, limits=RateLimits(rpm=300))  # 270 allowed
    assert free.chosen is not None and free.chosen.cell.exp_ids == ("A",) and free.bound == SERVER_BOUND
    assert (free.chosen.rpm, free.chosen.tpm) == pytest.approx((240, 72_000))
    tight = plan(cells(A, B), TARGET, SLO, limits=RateLimits(rpm=200))  # 180 allowed: A's 240 is over
    assert tight.chosen is not None and tight.chosen.cell.exp_ids == ("B",)
    assert (tight.chosen.rpm, tight.chosen.tpm) == pytest.approx((150, 90_000))
    assert tight.bound == LIMIT_BOUND and tight.binding == (RPM_LIMIT,) and tight.unlimited is not None
    assert tight.unlimited.cell.exp_ids == ("A",) and "rate limits rule out 2 x m at concurrency 4" in tight.notes[0]
    none = plan(cells(A, B), TARGET, SLO, limits=RateLimits(tpm=79_000))  # 71,100 allowed: both over
    assert none.chosen is None and none.bound == LIMIT_BOUND and none.binding == (TPM_LIMIT,)
    wide = plan(cells(A, B), TARGET, SLO, limits=RateLimits(rpm=300, tpm=85_000))  # 76,500 TPM allowed
    assert wide.chosen is not None and wide.chosen.cell.exp_ids == ("A",) and wide.bound == SERVER_BOUND


def test_no_configuration_meeting_the_slo_is_server_bound() -> None:
    strict = Slo(ttft_s=1.0, attainment=0.99)  # 100 of 100 cannot prove 99%
    result = plan(cells(A, B, slo=strict), TARGET, strict, limits=RateLimits(rpm=1e9))
    assert result.chosen is None and result.bound == SERVER_BOUND
    assert any("no measured configuration meets the SLO" in note for note in result.notes)


def test_token_pricing_without_prompt_tokens_cannot_cost() -> None:
    unknown = experiment("U", 1, 100, 2000.0, 1.0, prompt_tokens=None)
    result = plan(cells(unknown, B), TARGET, SLO, pricing=Pricing(price_in=1, price_out=2))
    assert result.chosen is not None and result.chosen.cell.exp_ids == ("B",) and result.binding == (COST_UNKNOWN,)


def test_pricing_is_one_mode_or_the_other() -> None:
    for bad in ({"price_in": 1.0}, {"gpus": 2}, {"price_in": 1.0, "price_out": 2.0, "gpus": 1}, {},
                {"gpu_hour_price": -1.0, "gpus": 1}, {"gpu_hour_price": 1.0, "gpus": 0}):
        with pytest.raises(UsageError):
            Pricing(**bad)


def test_a_plan_from_a_per_request_csv(tmp_path: Path) -> None:
    """From the CSV to the plan: 8 requests, 3 good (test_goodput's hand count), 17 TPS."""
    write_requests(tmp_path / "requests.csv", HAND)
    loose = Slo(ttft_s=0.5, tpot_s=0.05, e2el_s=2.0, attainment=0.1)  # 3 of 8: Wilson lower bound 0.137
    table = evaluate([result_row()], read_samples(tmp_path / "results.csv"), loose)
    result = plan(select_cells(table.experiments, loose), 100, loose, limits=RateLimits(rpm=1000, tpm=1e6))
    chosen = result.chosen
    assert chosen is not None and chosen.replicas == 6  # ceil(100 / 17)
    rpm = 6 * 60 * 2 / ((0.6 + 1.0 + 1.5 + 2.5 + 1.9 + 0.05 + 0.85 + 0.5) / 8)
    assert chosen.rpm == pytest.approx(rpm)  # 587.8 of 900 allowed
    assert chosen.tpm == pytest.approx(rpm * (100 + 51 / 8))  # 62,524 of 900,000 allowed
    assert result.bound == SERVER_BOUND
