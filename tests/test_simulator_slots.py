"""The simulator's slot limit (max_seqs) and per-context-token step cost, over real loopback HTTP.

Timing tests assert relations and generous bounds, not tight figures: a loaded 2-core CI
machine stretches steps, it never shortens them in aggregate (absolute deadlines).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.errors import UsageError
from scm_xl.simulator import SimConfig, roofline_timing, running_simulator
from support.servers import http_client

STEP = 0.01  # seconds per decode step in the timing tests
TOKENS = 10  # tokens per request: a request holds its slot for TOKENS steps


def client() -> httpx.Client:
    return http_client(timeout=30)


def stream(http: httpx.Client, base_url: str, *, prompt: str = "Say something.", max_tokens: int = TOKENS) -> int:
    """One streaming request; the number of content chunks it got."""
    payload = {"model": "m", "messages": [{"role": "user", "content": prompt}], "stream": True,
               "max_tokens": max_tokens}
    with http.stream("POST", f"{base_url}/chat/completions", json=payload) as response:
        assert response.status_code == 200
        return sum(1 for line in response.iter_lines() if '"content":' in line and '"role"' not in line)


def stream_once(base_url: str) -> int:
    """stream() on a client of its own (for threads)."""
    with client() as http:
        return stream(http, base_url)


def root(base_url: str) -> str:
    return base_url.removesuffix("/v1")


def sim_stats(base_url: str) -> dict:
    with client() as http:
        return http.get(root(base_url) + "/sim/stats").json()


def sim_requests(base_url: str) -> list[dict]:
    with client() as http:
        return http.get(root(base_url) + "/sim/requests").json()


def closed_loop(base_url: str, clients: int, requests_each: int) -> float:
    """`clients` threads, each sending its requests back to back (a closed loop), all
    starting together; the simulator's own throughput, tokens/s."""
    with client() as http:
        http.post(root(base_url) + "/sim/reset")
    barrier = threading.Barrier(clients)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            with client() as http:
                barrier.wait()
                for _ in range(requests_each):
                    assert stream(http, base_url) == TOKENS
        except BaseException as exc:  # report in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    stats = sim_stats(base_url)
    assert stats["completed"] == clients * requests_each
    return stats["tokens"] / (stats["last_byte_at"] - stats["first_request_at"])


# --- The step formula, exactly (no clock involved) -----------------------------------------


class _Recording(SimConfig):
    """A SimConfig that records every decode step's (sequences, context tokens, prefill tokens)."""

    def step_s(self, sequences: int, context_tokens: int = 0, prefill_tokens: int = 0) -> float:
        _STEPS.append((sequences, context_tokens, prefill_tokens))
        return super().step_s(sequences, context_tokens, prefill_tokens)


_STEPS: list[tuple[int, int, int]] = []


def test_each_step_charges_the_running_context_of_the_batch():
    _STEPS.clear()
    config = _Recording(step_base_s=0.0, step_per_seq_s=0.0, prefill_s_per_token=0.0)
    with running_simulator(config) as base_url, client() as http:
        assert stream(http, base_url, prompt="x" * 40, max_tokens=4) == 4  # 10 prompt tokens
        stats = sim_stats(base_url)
    # token k's step has context prompt + k - 1; the prefill is charged in the joining step only
    assert _STEPS == [(1, 10, 10), (1, 11, 0), (1, 12, 0), (1, 13, 0)]
    assert (stats["max_decoding"], stats["max_waiting"], stats["decoding"], stats["queued"]) == (1, 0, 0, 0)


def test_step_s_is_the_documented_sum():
    config = SimConfig(step_base_s=0.01, step_per_seq_s=0.001, step_per_ctx_token_s=1e-6,
                       prefill_s_per_token=1e-4)
    # 0.01 + 3 x 0.001 + 1e-6 x 3,000 + 1e-4 x 200
    assert config.step_s(3, 3000, 200) == pytest.approx(0.01 + 0.003 + 0.003 + 0.02)
    assert SimConfig(step_base_s=0.01, step_per_seq_s=0.001).step_s(3, 3000) == 0.01 + 0.003


def test_expected_stream_with_the_context_term():
    config = SimConfig(step_base_s=0.010, step_per_seq_s=0.0005, step_per_ctx_token_s=1e-5,
                       prefill_s_per_token=0.0001)
    expected = config.expected_stream(20, 64)
    # TTFT = 10.5 ms + (0.1 + 0.01) ms x 20 = 12.7 ms; mean ITL = 10.5 ms + 0.01 ms x (20 + 64 / 2) = 11.02 ms
    assert expected["ttft_s"] == pytest.approx(0.0127)
    assert expected["itl_s"] == pytest.approx(0.01102)
    # the sum of the 64 steps: 64 x 10.5 ms + 2 ms of prefill + 0.01 ms x (64 x 20 + 0 + 1 + ... + 63)
    assert expected["total_s"] == pytest.approx(64 * 0.0105 + 0.002 + 1e-5 * (64 * 20 + 64 * 63 / 2))
    assert expected["tps"] == pytest.approx(64 / expected["total_s"])
    # the default adds nothing: the old figures
    plain = SimConfig(step_base_s=0.010, step_per_seq_s=0.0005, prefill_s_per_token=0.0001)
    assert plain.expected_stream(20, 64)["total_s"] == pytest.approx(0.674)


def test_new_fields_default_to_nothing_and_are_validated():
    config = SimConfig()
    assert (config.max_seqs, config.step_per_ctx_token_s) == (0, 0.0)
    for field, value in (("max_seqs", -1), ("step_per_ctx_token_s", -1e-6)):
        with pytest.raises(UsageError, match=field):
            SimConfig(**{field: value})


# --- Over loopback --------------------------------------------------------------------------


def test_unlimited_slots_batch_everyone_at_once():
    config = SimConfig(step_base_s=STEP, step_per_seq_s=0.0, prefill_s_per_token=0.0)
    with running_simulator(config) as base_url:
        closed_loop(base_url, clients=8, requests_each=1)
        stats = sim_stats(base_url)
    assert stats["max_decoding"] == 8 and stats["max_waiting"] == 0
    assert stats["max_active"] == 8


def test_a_slot_limit_caps_decoding_and_makes_the_knee():
    config = SimConfig(step_base_s=STEP, step_per_seq_s=0.0, prefill_s_per_token=0.0, max_seqs=4)
    with running_simulator(config) as base_url:
        at_4 = closed_loop(base_url, clients=4, requests_each=2)
        at_8 = closed_loop(base_url, clients=8, requests_each=2)
        stats = sim_stats(base_url)
        ttfts = [r["first_token_at"] - r["received_at"] for r in sim_requests(base_url)]
    with running_simulator(dataclasses.replace(config, max_seqs=0)) as base_url:
        unlimited_8 = closed_loop(base_url, clients=8, requests_each=2)
        unlimited = sim_stats(base_url)
    assert stats["max_decoding"] == 4  # never more than the slots, though 8 were in flight
    assert stats["max_active"] == 8
    assert 1 <= stats["max_waiting"] <= 4
    # the knee: past 4 clients the tokens/s stays (at most 4 tokens per step), unlimited keeps rising
    rates = f"tokens/s: {at_4:.0f} at 4 clients, {at_8:.0f} at 8, {unlimited_8:.0f} at 8 without slots"
    assert at_8 <= 1.1 * 4 / STEP, rates  # 4 tokens a step at most, 400 tokens/s
    assert at_8 <= 1.5 * at_4, rates  # about equal; a loaded machine lowers the 4 clients' rate more
    # without slots all 8 decode at once (a wall-clock rate here would be a timed assertion on a shared
    # machine: the client is what a loaded machine slows first)
    assert unlimited["max_decoding"] == 8 and unlimited["max_waiting"] == 0, rates
    # the four that found no slot waited for a running sequence to finish: several steps
    assert max(ttfts) >= 0.5 * TOKENS * STEP


def test_queued_requests_join_in_arrival_order_and_their_ttft_includes_the_wait():
    config = SimConfig(step_base_s=STEP, step_per_seq_s=0.0, prefill_s_per_token=0.0, max_seqs=1)
    lengths = (3 * TOKENS, TOKENS, TOKENS)  # A holds the one slot for 30 steps while B, then C, arrive
    clients = [client() for _ in lengths]
    with running_simulator(config) as base_url, client() as poll:
        threads = []
        for count, (http, max_tokens) in enumerate(zip(clients, lengths), start=1):
            thread = threading.Thread(target=stream, args=(http, base_url), kwargs={"max_tokens": max_tokens})
            thread.start()
            threads.append(thread)
            deadline = time.monotonic() + 10  # each is received before the next is sent
            while poll.get(root(base_url) + "/sim/stats").json()["requests"] < count and time.monotonic() < deadline:
                time.sleep(0.002)
        for thread in threads:
            thread.join()
        stats = sim_stats(base_url)
        a, b, c = sorted(sim_requests(base_url), key=lambda r: r["received_at"])
    for http in clients:
        http.close()
    assert [r["tokens"] for r in (a, b, c)] == list(lengths)
    assert c["received_at"] < a["last_token_at"]  # B and C both waited while A decoded
    assert stats["max_decoding"] == 1 and stats["max_waiting"] == 2
    # one slot: B starts after A's last token, C after B's (first in, first out)
    assert b["first_token_at"] > a["last_token_at"]
    assert c["first_token_at"] > b["last_token_at"]
    # TTFT counts from arrival, so it holds the wait for the slot: C waited for B's ten steps at least
    assert c["first_token_at"] - c["received_at"] >= TOKENS * STEP
    assert b["first_token_at"] - b["received_at"] > a["last_token_at"] - b["received_at"]


def test_inter_token_latency_grows_with_the_prompt():
    config = SimConfig(step_base_s=0.002, step_per_seq_s=0.0, prefill_s_per_token=0.0, step_per_ctx_token_s=1e-5,
                       chars_per_token=4.0)
    short, long = "x" * 16, "x" * 4000  # 4 and 1,000 prompt tokens
    itl = {}
    with running_simulator(config) as base_url, client() as http:
        for name, prompt in (("short", short), ("long", long)):
            http.post(root(base_url) + "/sim/reset")
            assert stream(http, base_url, prompt=prompt, max_tokens=20) == 20
            itl[name] = sim_stats(base_url)["mean_itl_s"]
    expected_short = config.expected_stream(config.prompt_tokens_for(short), 20)["itl_s"]  # 2.1 ms
    expected_long = config.expected_stream(config.prompt_tokens_for(long), 20)["itl_s"]  # 12.1 ms
    assert expected_long - expected_short == pytest.approx(1e-5 * 996)
    assert itl["long"] - itl["short"] >= 0.5 * (expected_long - expected_short)
    assert itl["long"] >= 0.8 * expected_long


def test_roofline_timing_reads_the_kv_cache_per_context_token():
    from scm_xl.roofline import Deployment, analyze, load_catalog

    timing = roofline_timing("qwen2.5-7b", "a100-80gb", efficiency=0.6, context=256)
    # 57,344 KV bytes per token (2 x 28 layers x 4 KV heads x 128 x 2 B) at 0.6 x 2,039e9 B/s
    assert timing["step_per_ctx_token_s"] == pytest.approx(57344 / (0.6 * 2039e9))
    assert timing["step_per_seq_s"] == 0.0  # the KV read is in the context term, not counted twice
    # (80e9 - 15,231,233,024 bytes of weights) / (57,344 x 256) = 4,412.4 sequences
    assert timing["max_seqs"] == math.floor((80e9 - 2 * 7615616512) / (57344 * 256)) == 4412
    config = SimConfig(**timing)
    catalog = load_catalog()
    deployment = Deployment(catalog.find_model("qwen2.5-7b"), catalog.find_gpu("a100-80gb"), context=256,
                            bandwidth_efficiency=0.6, compute_efficiency=0.6)
    # every sequence at the roofline's context: the simulator's step is the roofline's decode step
    for row in analyze(deployment, [1, 8, 64]).batches:
        assert config.step_s(row.batch, row.batch * 256) == pytest.approx(row.memory_ms / 1e3)


def test_serve_sim_offers_the_slot_and_context_options():
    result = CliRunner().invoke(main, ["serve-sim", "--help"])
    assert result.exit_code == 0
    assert "--max-seqs" in result.output and "--step-per-ctx-token-s" in result.output
    conflict = CliRunner().invoke(main, ["serve-sim", "--model", "qwen2.5-7b", "--gpu", "a100-80gb",
                                         "--step-per-ctx-token-s", "0.001"])
    assert conflict.exit_code == 2
    assert "--step-per-ctx-token-s" in conflict.output
