"""The built-in simulated endpoint, over real loopback HTTP (nothing leaves 127.0.0.1)."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.errors import UsageError
from scm_xl.simulator import SimConfig, running_simulator
from support.servers import http_client

MESSAGES = [{"role": "user", "content": "Say something."}]


def client() -> httpx.Client:
    return http_client(timeout=10)


def stream_events(http: httpx.Client, base_url: str, **body) -> tuple[int, dict, list[str]]:
    """POST a streaming completion; return (status, headers, data payloads)."""
    payload = {"model": "m", "messages": MESSAGES, "stream": True, **body}
    with http.stream("POST", f"{base_url}/chat/completions", json=payload) as response:
        lines = [line for line in response.iter_lines()]
        return response.status_code, dict(response.headers), [
            line[len("data: "):] for line in lines if line.startswith("data: ")]


def stream_once(base_url: str, **body) -> tuple[int, dict, list[str]]:
    """stream_events on a client of its own (for threads)."""
    with client() as http:
        return stream_events(http, base_url, **body)


def content_chunks(payloads: list[str]) -> list[dict]:
    events = [json.loads(p) for p in payloads if p != "[DONE]"]
    return [e for e in events if e.get("choices") and e["choices"][0]["delta"].get("content")]


def sim_stats(base_url: str) -> dict:
    with client() as http:
        return http.get(base_url.removesuffix("/v1") + "/sim/stats").json()


@pytest.fixture(scope="module")
def fast_sim():
    with running_simulator(SimConfig.zero_delay(seed=1)) as base_url:
        yield base_url


def test_binds_loopback_by_default(fast_sim):
    assert fast_sim.startswith("http://127.0.0.1:")
    assert SimConfig().host == "127.0.0.1"


def test_models_endpoint(fast_sim):
    with client() as http:
        data = http.get(f"{fast_sim}/models").json()
    assert data["object"] == "list"
    assert [model["id"] for model in data["data"]] == ["Qwen/Qwen2.5-7B-Instruct"]


def test_non_streaming_completion(fast_sim):
    with client() as http:
        response = http.post(f"{fast_sim}/chat/completions",
                             json={"model": "m", "messages": MESSAGES, "max_tokens": 7})
    data = response.json()
    assert response.status_code == 200
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["choices"][0]["message"]["content"].startswith(" The quick")
    assert data["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11}


def test_streaming_completion_with_usage(fast_sim):
    with client() as http:
        status, headers, payloads = stream_events(http, fast_sim, max_tokens=5,
                                                  stream_options={"include_usage": True})
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["transfer-encoding"] == "chunked"
    assert payloads[-1] == "[DONE]"
    events = [json.loads(p) for p in payloads[:-1]]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len(content_chunks(payloads)) == 5
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == []
    assert events[-1]["usage"]["completion_tokens"] == 5


def test_usage_only_when_asked(fast_sim):
    with client() as http:
        _, _, payloads = stream_events(http, fast_sim, max_tokens=3)
    assert not any("usage" in json.loads(p) for p in payloads if p != "[DONE]")
    with running_simulator(SimConfig.zero_delay(usage=False)) as base_url, client() as http:
        _, _, payloads = stream_events(http, base_url, max_tokens=3, stream_options={"include_usage": True})
    assert not any("usage" in json.loads(p) for p in payloads if p != "[DONE]")
    assert len(content_chunks(payloads)) == 3


def test_keep_alive_serves_many_requests_on_one_connection(fast_sim):
    with client() as http:
        for _ in range(20):
            assert len(content_chunks(stream_events(http, fast_sim, max_tokens=2)[2])) == 2


def test_eos_min_tokens_and_ignore_eos():
    with running_simulator(SimConfig.zero_delay(eos_prob=1.0, seed=3)) as base_url, client() as http:
        assert len(content_chunks(stream_events(http, base_url, max_tokens=20)[2])) == 1
        assert len(content_chunks(stream_events(http, base_url, max_tokens=20, min_tokens=6)[2])) == 6
        assert len(content_chunks(stream_events(http, base_url, max_tokens=20, ignore_eos=True)[2])) == 20


def test_seed_makes_lengths_reproducible():
    def lengths() -> list[int]:
        with running_simulator(SimConfig.zero_delay(eos_prob=0.2, seed=42)) as base_url, client() as http:
            return [len(content_chunks(stream_events(http, base_url, max_tokens=40)[2])) for _ in range(8)]

    first = lengths()
    assert first == lengths()
    assert len(set(first)) > 1


def test_max_concurrency_answers_429_with_retry_after():
    config = SimConfig(ttft_s=1.0, itl_s=0.0, max_concurrency=1, retry_after_s=2.5)
    with running_simulator(config) as base_url:
        holder = threading.Thread(target=lambda: stream_once(base_url, max_tokens=1))
        holder.start()
        while sim_stats(base_url)["requests"] == 0:  # the holder's request is in
            time.sleep(0.01)
        with client() as http:
            response = http.post(f"{base_url}/chat/completions",
                                 json={"model": "m", "messages": MESSAGES, "stream": True})
        holder.join()
        assert response.status_code == 429
        assert response.headers["retry-after"] == "2.5"
        assert response.json()["error"]["code"] == "rate_limit_exceeded"
        assert sim_stats(base_url)["rejected_429"] == 1


def test_error_rate_answers_500():
    with running_simulator(SimConfig.zero_delay(error_rate=1.0)) as base_url, client() as http:
        response = http.post(f"{base_url}/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "simulated internal error"


def test_truncated_stream_ends_without_done():
    with running_simulator(SimConfig.zero_delay(truncate_prob=1.0, seed=1)) as base_url, client() as http:
        status, _, payloads = stream_events(http, base_url, max_tokens=30)
    assert status == 200
    assert "[DONE]" not in payloads
    assert not any(json.loads(p)["choices"][0]["finish_reason"] for p in payloads)
    assert 1 <= len(content_chunks(payloads)) < 30


def test_stall_pauses_a_stream_once():
    config = SimConfig(step_base_s=0.0, step_per_seq_s=0.0, prefill_s_per_token=0.0, stall_prob=1.0, stall_s=0.3)
    with running_simulator(config) as base_url, client() as http:
        started = time.perf_counter()
        status, _, payloads = stream_events(http, base_url, max_tokens=5)
        elapsed = time.perf_counter() - started
    assert status == 200 and payloads[-1] == "[DONE]"
    assert 0.3 <= elapsed < 2.0


def test_fixed_delays_are_what_the_simulator_produces():
    with running_simulator(SimConfig(ttft_s=0.05, itl_s=0.01)) as base_url, client() as http:
        started = time.perf_counter()
        stream_events(http, base_url, max_tokens=11)
        elapsed = time.perf_counter() - started
        stats = sim_stats(base_url)
    assert stats["tokens"] == 11
    assert stats["mean_ttft_s"] == pytest.approx(0.05, abs=0.015)
    assert stats["mean_itl_s"] == pytest.approx(0.01, abs=0.001)
    assert 0.15 <= elapsed < 0.5


def test_decode_step_grows_with_active_sequences():
    config = SimConfig(step_base_s=0.002, step_per_seq_s=0.001, prefill_s_per_token=0.0)
    with running_simulator(config) as base_url:
        with client() as http:
            stream_events(http, base_url, max_tokens=20)
        alone = sim_stats(base_url)["mean_itl_s"]
        with client() as http:
            http.post(base_url.removesuffix("/v1") + "/sim/reset")
        together = threading.Barrier(10)  # on a loaded machine threads start late: send at once

        def send() -> None:
            with client() as http:  # each client made before the barrier: building one takes the GIL a while
                together.wait(timeout=30)
                stream_events(http, base_url, max_tokens=20)

        threads = [threading.Thread(target=send) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        batched = sim_stats(base_url)
    # steps last 0.002 + 0.001 x active: 3 ms alone, 12 ms with ten (timers may fire a little late)
    assert 0.0025 <= alone < 0.008
    assert batched["max_active"] == 10
    assert batched["mean_itl_s"] >= 0.008 and batched["mean_itl_s"] > 1.5 * alone


def test_prefill_cost_delays_the_first_token():
    config = SimConfig(step_base_s=0.0, step_per_seq_s=0.0, prefill_s_per_token=0.001, chars_per_token=4.0)
    long_prompt = [{"role": "user", "content": "x" * 400}]  # 100 prompt tokens: 0.1 s of prefill
    with running_simulator(config) as base_url, client() as http:
        stream_events(http, base_url, max_tokens=2, messages=long_prompt)
        stats = sim_stats(base_url)
    assert stats["mean_ttft_s"] == pytest.approx(0.1, abs=0.03)


def test_thousand_concurrent_streams():
    import asyncio
    from urllib.parse import urlsplit

    body = json.dumps({"model": "m", "messages": MESSAGES, "stream": True, "max_tokens": 10}).encode()
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
               f"content-length: {len(body)}\r\n\r\n").encode() + body

    async def one(opened: asyncio.Event, count: list[int]) -> bytes:
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        count.append(1)
        if len(count) == 1000:
            opened.set()
        await opened.wait()  # all 1000 streams are open before any request is sent
        writer.write(request)
        data = await reader.readuntil(b"0\r\n\r\n")
        writer.close()
        await writer.wait_closed()
        return data

    async def many() -> list[bytes]:
        opened, count = asyncio.Event(), []
        return await asyncio.gather(*(one(opened, count) for _ in range(1000)))

    config = SimConfig(step_base_s=0.01, step_per_seq_s=0.0, prefill_s_per_token=0.0)
    with running_simulator(config) as base_url:
        address = urlsplit(base_url)
        replies = asyncio.run(many())
        stats = sim_stats(base_url)
    assert all(reply.count(b'"delta":{"content":') == 10 and b"[DONE]" in reply for reply in replies)
    assert stats["completed"] == 1000
    # one decode loop carried most of them together (how many were open at once depends on how fast
    # a loaded machine lets the client open them: 824 of 1000 in one CI run)
    assert stats["max_active"] >= 500


@pytest.mark.parametrize("method, path, body, status", [
    ("GET", "/nowhere", None, 404),
    ("GET", "/v1/chat/completions", None, 405),
    ("POST", "/v1/chat/completions", b"{not json", 400),
    ("POST", "/v1/chat/completions", b'{"messages": []}', 400),
    ("POST", "/v1/chat/completions", b'{"messages": [{"content": "x"}], "max_tokens": 0}', 400),
])
def test_bad_requests(fast_sim, method, path, body, status):
    root = fast_sim.removesuffix("/v1")
    with client() as http:
        response = http.request(method, root + path, content=body)
    assert response.status_code == status
    assert "error" in response.json()


def test_strict_model():
    with running_simulator(SimConfig.zero_delay(strict_model=True, model_name="served")) as base_url, \
            client() as http:
        wrong = http.post(f"{base_url}/chat/completions", json={"model": "other", "messages": MESSAGES})
        right = http.post(f"{base_url}/chat/completions", json={"model": "served", "messages": MESSAGES,
                                                                "max_tokens": 1})
    assert wrong.status_code == 404
    assert right.status_code == 200


@pytest.mark.parametrize("field, value", [
    ("eos_prob", 1.5), ("error_rate", -0.1), ("step_base_s", -1.0), ("ttft_s", -0.1), ("port", 70000),
    ("chars_per_token", 0.0),
])
def test_config_validation(field, value):
    with pytest.raises(UsageError, match=field):
        SimConfig(**{field: value})


def test_port_in_use_is_reported():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            with running_simulator(SimConfig(port=port)):
                pass


def test_serve_sim_help():
    result = CliRunner().invoke(main, ["serve-sim", "--help"])
    assert result.exit_code == 0
    for option in ("--max-concurrency", "--error-rate", "--stall-prob", "--truncate-prob", "--seed",
                   "--ttft-s", "--itl-s", "--zero-delay", "--step-base-s", "--prefill-s-per-token", "--eos-prob"):
        assert option in result.output


def test_serve_sim_rejects_conflicting_options():
    result = CliRunner().invoke(main, ["serve-sim", "--zero-delay", "--ttft-s", "0.05"])
    assert result.exit_code == 2
    assert "Error: --zero-delay excludes --ttft-s and --itl-s" in result.output


# --- Step scheduling (issue 10): the timing the roofline gives, not the timer's ----------------


def test_a_late_step_shortens_the_next_one_instead_of_adding_up():
    from scm_xl.simulator import next_deadline

    # a 12 ms step whose timer fired 0.8 ms late: the next step ends at 24 ms, not 12.8 + 12
    assert next_deadline(0.012, now=0.0128, step=0.012) == pytest.approx(0.024)
    # on time: one step after the last deadline
    assert next_deadline(0.012, now=0.012, step=0.012) == pytest.approx(0.024)
    # more than a whole step behind (a stalled process): restart from now, no burst of catch-up steps
    assert next_deadline(0.012, now=0.030, step=0.012) == pytest.approx(0.042)


def test_expected_stream_states_the_ttft_share():
    config = SimConfig(step_base_s=0.010, step_per_seq_s=0.0005, prefill_s_per_token=0.0001)
    # one stream, 20 prompt tokens, 64 tokens: TTFT = 10.5 ms + 20 x 0.1 ms = 12.5 ms,
    # then 63 x 10.5 ms = 661.5 ms; total 674 ms; 64 / 0.674 = 94.96 tok/s; TTFT share 12.5 / 674
    expected = config.expected_stream(20, 64)
    assert expected["ttft_s"] == pytest.approx(0.0125)
    assert expected["total_s"] == pytest.approx(0.674)
    assert expected["tps"] == pytest.approx(64 / 0.674)
    assert expected["ttft_share"] == pytest.approx(0.0125 / 0.674)
    # "Write a short story ..." is 79 characters: ceil(79 / 4) = 20 prompt tokens
    assert config.prompt_tokens_for("x" * 79) == 20


def test_roofline_timing_keeps_the_models_apart():
    from scm_xl.simulator import roofline_timing

    qwen = roofline_timing("qwen2.5-7b", "a100-80gb", efficiency=0.6, context=256)
    llama = roofline_timing("llama-3.1-8b", "a100-80gb", efficiency=0.6, context=256)
    # weight bytes read per token: 2 x 7,070,619,136 and 2 x 7,504,924,672 at 0.6 x 2,039e9 B/s
    assert qwen["step_base_s"] == pytest.approx(2 * 7070619136 / (0.6 * 2039e9))
    assert llama["step_base_s"] / qwen["step_base_s"] == pytest.approx(7504924672 / 7070619136)
