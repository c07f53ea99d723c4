"""The collector: matrix, CSVs, measurement, faults, resume and the API key.

Everything runs over real HTTP against the built-in simulator or tiny misbehaving
servers on 127.0.0.1, through the production send path (collect/send.py); nothing
leaves loopback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import socket
from pathlib import Path

import numpy
import pytest
from click.testing import CliRunner

from scm_xl import stats
from scm_xl.cli import main
from scm_xl.collect import (
    REQUEST_COLUMNS, CollectConfig, Secret, load_matrix_file, matrix_points, open_senders,
    resolve_api_key, run_collection,
)
from scm_xl.collect.run import _retry_delay
from scm_xl.errors import InputError, UsageError
from scm_xl.results import RESULT_COLUMNS, read_results
from scm_xl.simulator import SimConfig, running_simulator
from support.servers import SENTINEL_KEY, SSE_HEAD, collect, raw_server, read_request, requests_of, sse_chunk, \
    token_event

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def answering(status: int, headers: dict[str, str], body: bytes, calls: list | None = None):
    """A raw_server handler giving every request on a connection the same answer (Content-Length)."""
    head = f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n".encode()
    head += b"".join(f"{name}: {value}\r\n".encode() for name, value in headers.items()) + b"\r\n"

    async def handle(reader, writer):
        while True:
            request = await read_request(reader)
            if calls is not None:
                calls.append(request)
            writer.write(head + body)
            await writer.drain()

    return handle


@pytest.fixture(scope="module")
def sim():
    with running_simulator(SimConfig.zero_delay(seed=1)) as base_url:
        yield base_url


# -- statistics ----------------------------------------------------------------------


def test_percentiles_against_a_hand_computation():
    values = [4.0, 1.0, 10.0, 3.0, 2.0]  # sorted: 1 2 3 4 10
    # p50: position 4 x 0.50 = 2.0 -> 3
    # p95: position 4 x 0.95 = 3.8 -> 4 + 0.8 x (10 - 4) = 8.8
    # p99: position 4 x 0.99 = 3.96 -> 4 + 0.96 x 6 = 9.76
    assert stats.percentiles(values) == pytest.approx((3.0, 8.8, 9.76))
    assert stats.percentile([0.0, 1.0], 25) == pytest.approx(0.25)
    assert stats.percentile([7.0], 99) == 7.0
    assert stats.percentiles([]) is None
    with pytest.raises(ValueError):
        stats.percentile([], 50)
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)


def test_percentiles_match_numpy_linear():
    values = [0.013, 0.5, 0.021, 0.9, 0.33, 0.07, 0.2]
    for q in (0, 1, 50, 90, 95, 99, 100):
        assert stats.percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)))


# -- matrix and configuration ---------------------------------------------------------------


def test_defaults_follow_the_article():
    config = CollectConfig()
    assert config.base_url == "https://api.siliconflow.cn/v1"
    assert config.models == ("Qwen/Qwen2.5-7B-Instruct",)
    assert config.concurrency == (1, 2, 4, 8)
    assert config.max_tokens == (50, 100, 200)
    assert config.requests_per_slot == 10
    assert config.requests_csv == Path("requests.csv")
    assert CollectConfig(results_path=Path("out/run1.csv")).requests_csv == Path("out/run1.requests.csv")


def test_matrix_points_order_and_ids():
    config = CollectConfig(models=("a", "b"), concurrency=(1, 4), max_tokens=(50, 100), repeats=2)
    points = matrix_points(config)
    assert len(points) == 2 * 2 * 2 * 2
    assert [p.exp_id for p in points[:4]] == ["E001-R1", "E001-R2", "E002-R1", "E002-R2"]
    assert points[2].key == ("a", 1, 100, 1)
    assert points[-1].key == ("b", 4, 100, 2)
    assert [p.exp_id for p in matrix_points(CollectConfig(concurrency=(1, 2)))] == [
        "E001", "E002", "E003", "E004", "E005", "E006"]


def test_example_matrix_file_loads():
    values = load_matrix_file(EXAMPLES / "matrix.toml")
    config = CollectConfig(**values)
    assert config.concurrency == (1, 2, 4, 8)
    assert config.max_tokens == (50, 100, 200)
    assert config.models == ("Qwen/Qwen2.5-7B-Instruct",)


@pytest.mark.parametrize("text, problem", [
    ("concurrency = [1, 2\n", "bad TOML"),
    ("concurency = [1]\n", "unknown key 'concurency'"),
    ("concurrency = 4\n", "'concurrency' has the wrong type"),
    ("max_tokens = ['a']\n", "'max_tokens' must be a list of integers"),
])
def test_bad_matrix_file(tmp_path, text, problem):
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=problem):
        load_matrix_file(path)


def test_config_validation():
    with pytest.raises(UsageError, match="concurrency"):
        CollectConfig(concurrency=(0,))
    with pytest.raises(UsageError, match="base URL"):
        CollectConfig(base_url="ftp://127.0.0.1/v1")
    with pytest.raises(UsageError, match="exclude each other"):
        CollectConfig(resume=True, overwrite=True)


# -- collection against the simulator --------------------------------------------------------


def test_matrix_shape_and_csv_schema(tmp_path, sim):
    report = collect(tmp_path, sim, models=("m1", "m2"), concurrency=(1, 3), max_tokens=(4, 7), repeats=2,
                     requests_per_slot=2)
    table = read_results(tmp_path / "results.csv")
    assert table.warnings == []
    assert len(table.rows) == len(report.rows) == 2 * 2 * 2 * 2
    header = (tmp_path / "results.csv").read_text().splitlines()[0].split(",")
    assert tuple(header) == RESULT_COLUMNS
    for row in table.rows:
        assert row.total_requests == row.concurrency * 2 == row.ok_requests
        assert row.failed_requests == row.rate_limited_requests == 0
        assert row.total_output_tokens == row.total_requests * row.max_tokens
        assert row.total_time_s > 0 and row.tps > 0
        assert row.latency_p50_s <= row.latency_p95_s <= row.latency_p99_s
        assert row.ttft_p50_s <= row.latency_p50_s
        assert row.mean_itl_s is not None and row.prompt_tokens > 0
    assert {(r.model, r.concurrency, r.max_tokens, r.repeat) for r in table.rows} == {
        (m, c, t, r) for m in ("m1", "m2") for c in (1, 3) for t in (4, 7) for r in (1, 2)}
    requests_header = (tmp_path / "requests.csv").read_text().splitlines()[0].split(",")
    assert tuple(requests_header) == REQUEST_COLUMNS
    assert len(requests_of(tmp_path)) == sum(row.total_requests for row in table.rows)


def test_token_accounting(tmp_path, sim):
    collect(tmp_path, sim, concurrency=(1, 4), max_tokens=(5, 9), requests_per_slot=3, warmup=2)
    rows = read_results(tmp_path / "results.csv").rows
    measured = requests_of(tmp_path)
    for row in rows:
        mine = [r for r in measured if r["exp_id"] == row.exp_id]
        assert len(mine) == row.total_requests
        assert sum(int(r["completion_tokens"]) for r in mine) == row.total_output_tokens
        assert all(r["tokens_counted"] == "false" and r["finish_reason"] == "length" for r in mine)
        assert all(int(r["chunks"]) == int(r["completion_tokens"]) == row.max_tokens for r in mine)
    warm = requests_of(tmp_path, warmup=True)
    assert len(warm) == 2 * len(rows)  # excluded from every figure above


def test_counted_chunks_when_the_server_sends_no_usage(tmp_path):
    with running_simulator(SimConfig.zero_delay(usage=False)) as base_url:
        collect(tmp_path, base_url, concurrency=(2,), max_tokens=(6,))
    row = read_results(tmp_path / "results.csv").rows[0]
    assert row.total_output_tokens == 2 * 2 * 6
    assert row.prompt_tokens is None
    assert "tokens counted from chunks for 4 request(s)" in row.notes
    assert {r["tokens_counted"] for r in requests_of(tmp_path)} == {"true"}


def test_ignore_eos_and_min_tokens_are_passed_through(tmp_path):
    runs = {"plain": {}, "min": {"min_tokens": 4}, "eos": {"ignore_eos": True}}
    with running_simulator(SimConfig.zero_delay(eos_prob=1.0)) as base_url:
        for name, options in runs.items():
            (tmp_path / name).mkdir()
            collect(tmp_path / name, base_url, concurrency=(1,), max_tokens=(10,), **options)
    lengths = {name: [int(r["completion_tokens"]) for r in requests_of(tmp_path / name)]
               for name in ("plain", "min", "eos")}
    assert lengths == {"plain": [1, 1], "min": [4, 4], "eos": [10, 10]}
    notes = {name: read_results(tmp_path / name / "results.csv").rows[0].notes for name in lengths}
    assert "mean output 1.0 of max_tokens 10" in notes["plain"]
    assert "min_tokens=4" in notes["min"]
    assert notes["eos"] == "ignore_eos"
    assert {r["finish_reason"] for r in requests_of(tmp_path / "plain")} == {"stop"}


def test_clock_starts_when_the_request_is_due(tmp_path):
    with running_simulator(SimConfig(ttft_s=0.02, itl_s=0.005)) as base_url:
        collect(tmp_path, base_url, concurrency=(3,), max_tokens=(5,), requests_per_slot=3)
    rows = requests_of(tmp_path)
    for slot in ("0", "1", "2"):
        mine = sorted((r for r in rows if r["slot"] == slot), key=lambda r: int(r["seq"]))
        assert float(mine[0]["scheduled_s"]) == pytest.approx(0.0, abs=0.01)
        for previous, current in zip(mine, mine[1:]):
            # due when the previous request of the slot ended
            ended = float(previous["scheduled_s"]) + float(previous["latency_s"])
            assert float(current["scheduled_s"]) == pytest.approx(ended, abs=1e-5)
    for r in rows:
        assert float(r["sent_s"]) >= float(r["scheduled_s"])
        # timers may fire up to 1 ms early; chunks read in one burst after a stall give TTFT = latency
        assert 0.019 <= float(r["ttft_s"]) <= float(r["latency_s"])
        # the mean gap between chunks, from the request's own clock: not the simulator's 5 ms, which
        # a loaded machine stretches or (chunks read in one burst after a stall) squeezes
        gaps = (float(r["latency_s"]) - float(r["ttft_s"])) / (int(r["chunks"]) - 1)
        assert float(r["mean_itl_s"]) == pytest.approx(gaps, abs=2e-6)
        assert float(r["max_itl_s"]) >= float(r["mean_itl_s"])


def test_progress_bar_and_summary(tmp_path, sim, capsys):
    import io

    from rich.console import Console

    out = io.StringIO()
    config = CollectConfig(base_url=sim, models=("m",), concurrency=(1, 2), max_tokens=(3,), requests_per_slot=2,
                           results_path=tmp_path / "results.csv")
    report = asyncio.run(run_collection(config, console=Console(file=out, width=120), progress=True))
    assert len(report.rows) == 2
    assert "scm-xl collect: 2 experiment(s)" in out.getvalue()
    assert "ok/fail/429" in out.getvalue()
    assert "done" in capsys.readouterr().err  # the bar ends on stderr


def test_many_streams_are_sharded_over_clients(tmp_path, sim):
    report = collect(tmp_path, sim, concurrency=(300,), max_tokens=(3,), requests_per_slot=1)
    row = report.rows[0]
    assert row.ok_requests == 300 and row.total_output_tokens == 900


def test_httpx_default_transport_works_too(tmp_path, sim):
    report = collect(tmp_path, sim, concurrency=(2,), max_tokens=(3,), transport="httpx")
    assert report.rows[0].ok_requests == 4
    assert report.rows[0].total_output_tokens == 12


# -- faults ---------------------------------------------------------------------------------


def test_rate_limited_requests_retry_after_and_flag_the_experiment(tmp_path):
    config = SimConfig(ttft_s=0.1, itl_s=0.0, max_concurrency=1, retry_after_s=0.02)
    with running_simulator(config) as base_url:
        collect(tmp_path, base_url, concurrency=(3,), max_tokens=(2,), requests_per_slot=2, max_retries=50)
    row = read_results(tmp_path / "results.csv").rows[0]
    assert row.rate_limited_requests > 0
    assert row.ok_requests + row.failed_requests + row.rate_limited_requests == row.total_requests == 6
    assert row.failed_requests == 0
    assert row.total_output_tokens == 12  # every request got through in the end
    assert row.notes.startswith("rate-limited:")
    limited = [r for r in requests_of(tmp_path) if r["status"] == "rate_limited"]
    assert limited and all(int(r["retries"]) > 0 and r["error_class"] == "" for r in limited)


def test_retry_after_is_capped_and_retries_are_bounded(tmp_path):
    calls = []

    always_429 = answering(429, {"retry-after": "100", "content-type": "application/json"},
                           b'{"error": "slow down"}', calls)
    with raw_server(always_429) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), requests_per_slot=1, max_retries=2, max_retry_after_s=0.01,
                check_first=False)
    row = read_results(tmp_path / "results.csv").rows[0]
    (record,) = requests_of(tmp_path)
    assert len(calls) == 3
    assert record["status"] == "rate_limited" and record["error_class"] == "rate_limited"
    assert record["retries"] == "2" and float(record["retry_wait_s"]) == pytest.approx(0.02)
    assert row.rate_limited_requests == 1 and row.ok_requests == 0
    assert "1 gave up" in row.notes
    assert row.latency_p50_s is None and row.total_time_s > 0


def test_retry_delay_parsing():
    assert _retry_delay("2", 0, 10) == 2.0
    assert _retry_delay("0.25", 0, 10) == 0.25
    assert _retry_delay("60", 0, 10) == 10.0
    assert _retry_delay(None, 0, 10) == 0.5
    assert _retry_delay("soon", 3, 10) == 4.0
    assert _retry_delay("Wed, 21 Oct 2015 07:28:00 GMT", 0, 10) == 0.0  # a date in the past


def test_server_errors_are_recorded_and_the_row_is_kept(tmp_path):
    with running_simulator(SimConfig.zero_delay(error_rate=1.0)) as base_url:
        collect(tmp_path, base_url, concurrency=(2,))
    row = read_results(tmp_path / "results.csv").rows[0]
    assert row.failed_requests == 4 and row.ok_requests == 0
    assert row.total_time_s > 0 and row.total_output_tokens == 0
    assert row.notes == "failed: 4 (http_5xx 4)"
    record = requests_of(tmp_path)[0]
    assert record["http_status"] == "500" and record["error_class"] == "http_5xx"
    assert "simulated internal error" in record["error"]


def test_read_timeout(tmp_path):
    with running_simulator(SimConfig(ttft_s=1.5, itl_s=0.0)) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), requests_per_slot=1, timeout_s=0.2)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == "timeout"
    assert 0.2 <= float(record["latency_s"]) < 1.0


def test_request_timeout(tmp_path):
    with running_simulator(SimConfig(ttft_s=0.0, itl_s=0.1)) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), max_tokens=(50,), requests_per_slot=1, request_timeout_s=0.3)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == "timeout"
    assert 0 < int(record["completion_tokens"]) < 50  # tokens that did arrive are kept, counted


def test_stalled_stream_hits_the_read_timeout(tmp_path):
    config = SimConfig(step_base_s=0.0, step_per_seq_s=0.0, prefill_s_per_token=0.0, stall_prob=1.0, stall_s=1.0)
    with running_simulator(config) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), max_tokens=(20,), requests_per_slot=1, timeout_s=0.2)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == "timeout" and record["status"] == "failed"


def test_connection_reset_mid_stream(tmp_path):
    async def reset(reader, writer):
        await read_request(reader)
        writer.write(SSE_HEAD + sse_chunk(token_event()))
        await writer.drain()
        writer.transport.abort()  # RST

    with raw_server(reset) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), requests_per_slot=2)
    records = requests_of(tmp_path)
    assert [r["error_class"] for r in records] == ["connection_error", "connection_error"]
    assert records[0]["completion_tokens"] == "1"  # the token before the reset is kept


def test_server_closing_without_a_response(tmp_path):
    async def close(reader, writer):
        await read_request(reader)
        writer.close()

    with raw_server(close) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), requests_per_slot=1)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == "connection_error"
    assert "disconnected" in record["error"] or "closed" in record["error"]


def test_connection_refused(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    collect(tmp_path, f"http://127.0.0.1:{port}/v1", concurrency=(1,), requests_per_slot=1, check_first=False)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == "connect_error"


def test_truncated_stream(tmp_path):
    with running_simulator(SimConfig.zero_delay(truncate_prob=1.0, seed=2)) as base_url:
        collect(tmp_path, base_url, concurrency=(2,), max_tokens=(20,))
    row = read_results(tmp_path / "results.csv").rows[0]
    records = requests_of(tmp_path)
    assert {r["error_class"] for r in records} == {"truncated_stream"}
    assert all(r["tokens_counted"] == "true" and 0 < int(r["completion_tokens"]) < 20 for r in records)
    assert row.failed_requests == 4
    assert row.total_output_tokens == sum(int(r["completion_tokens"]) for r in records)


def test_truncated_mid_line_over_raw_http(tmp_path):
    async def cut(reader, writer):
        await read_request(reader)
        writer.write(SSE_HEAD + sse_chunk(token_event()) + sse_chunk('data: {"choices": [{"del') + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    with raw_server(cut) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), requests_per_slot=1)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == "truncated_stream"


@pytest.mark.parametrize("body, error_class", [
    (b"data: {not json}\n\n", "malformed_sse"),
    (b"data: [1, 2]\n\n", "malformed_sse"),
    (b'data: {"error": {"message": "overloaded"}}\n\n', "stream_error"),
    (b"data: " + b"x" * (300 * 1024), "line_too_long"),
    (b"data: " + b"x" * (300 * 1024) + b"\n\n", "line_too_long"),
])
def test_malformed_streams(tmp_path, body, error_class):
    handler = answering(200, {"content-type": "text/event-stream"}, token_event().encode() + body)
    with raw_server(handler) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), requests_per_slot=1, max_line_bytes=256 * 1024)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == error_class
    assert record["status"] == "failed"
    assert len(record["error"]) <= 300


def test_a_json_answer_to_a_streaming_request(tmp_path):
    handler = answering(200, {"content-type": "application/json"}, b'{"choices": [{"message": {"content": "hi"}}]}')
    with raw_server(handler) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), requests_per_slot=1, check_first=False)
    (record,) = requests_of(tmp_path)
    assert record["error_class"] == "not_streamed"
    assert "not an event stream" in record["error"]


def test_a_bug_in_one_request_does_not_end_the_run(tmp_path, sim):
    class Buggy:
        """The production sender, with a bug in its send."""

        def __init__(self, inner):
            self.inner = inner

        async def prepare(self, request):
            return await self.inner.prepare(request)

        async def send(self, prepared):
            raise RuntimeError("boom")

        async def aclose(self):
            await self.inner.aclose()

    def buggy(config, max_concurrency):
        return [Buggy(sender) for sender in open_senders(config, max_concurrency)]

    report = collect(tmp_path, sim, senders=buggy, concurrency=(1, 2))
    assert len(report.rows) == 2
    assert {r["error_class"] for r in requests_of(tmp_path)} == {"client_error"}


# -- files, interruption and resume ------------------------------------------------------------


def test_existing_output_needs_resume_or_overwrite(tmp_path, sim):
    collect(tmp_path, sim, concurrency=(1,))
    with pytest.raises(UsageError, match="--resume .* --force"):
        collect(tmp_path, sim, concurrency=(1,))
    collect(tmp_path, sim, concurrency=(2,), overwrite=True)
    assert [row.concurrency for row in read_results(tmp_path / "results.csv").rows] == [2]


def test_resume_after_an_interrupted_run(tmp_path):
    results = tmp_path / "results.csv"
    with running_simulator(SimConfig(ttft_s=0.01, itl_s=0.01)) as base_url:
        config = CollectConfig(base_url=base_url, models=("m",), concurrency=(1, 2, 3, 4), max_tokens=(5, 6),
                               requests_per_slot=2, results_path=results)

        async def interrupted() -> None:
            task = asyncio.create_task(run_collection(config))
            while not (results.exists() and results.read_text().count("\n") >= 3):
                await asyncio.sleep(0.01)
            task.cancel()  # what Ctrl-C does to asyncio.run's main task
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(interrupted())
        first = read_results(results)
        assert first.warnings == [] and 2 <= len(first.rows) < 8
        done = {row.exp_id for row in first.rows}
        assert {r["exp_id"] for r in requests_of(tmp_path)} == done  # no rows of the cut experiment

        report = asyncio.run(run_collection(dataclasses.replace(config, resume=True)))
    final = read_results(results)
    assert len(report.skipped) == len(first.rows)
    assert len(final.rows) == 8
    assert sorted(row.exp_id for row in final.rows) == [f"E{i:03d}" for i in range(1, 9)]
    measured = requests_of(tmp_path)
    assert len(measured) == sum(row.total_requests for row in final.rows)


def test_resume_drops_request_rows_without_a_results_row(tmp_path, sim):
    collect(tmp_path, sim, concurrency=(1,))
    requests = tmp_path / "requests.csv"
    orphan = requests.read_text().splitlines()[1].replace("E001", "E002")
    requests.write_text(requests.read_text() + orphan + "\n")
    report = collect(tmp_path, sim, concurrency=(1, 2), resume=True)
    assert [row.exp_id for row in report.rows] == ["E002"]
    assert len([r for r in requests_of(tmp_path) if r["exp_id"] == "E002"]) == 4


def test_resume_with_a_changed_matrix_keeps_exp_ids_unique(tmp_path, sim):
    collect(tmp_path, sim, concurrency=(2,))
    report = collect(tmp_path, sim, concurrency=(1, 2), resume=True)  # (1) is new and would be E001
    assert [row.exp_id for row in report.rows] == ["E001-2"]
    assert len(read_results(tmp_path / "results.csv").rows) == 2


# -- the API key --------------------------------------------------------------------------------


def test_api_key_resolution(tmp_path):
    assert resolve_api_key(environ={})[0] is None
    key, source = resolve_api_key(environ={"OPENAI_API_KEY": "b", "SILICONFLOW_API_KEY": "a"})
    assert key.reveal() == "a" and source == "SILICONFLOW_API_KEY"
    key, source = resolve_api_key(environ={"SCM_XL_API_KEY": "c", "OPENAI_API_KEY": "b"})
    assert source == "SCM_XL_API_KEY"
    path = tmp_path / "key"
    path.write_text("from-file\n")
    assert resolve_api_key(path, environ={"SCM_XL_API_KEY": "c"})[0].reveal() == "from-file"
    with pytest.raises(InputError, match="cannot read the API key file"):
        resolve_api_key(tmp_path / "missing")


def test_key_is_not_in_repr():
    config = CollectConfig(api_key=SENTINEL_KEY)
    assert SENTINEL_KEY not in repr(config) and SENTINEL_KEY not in str(config.api_key)
    assert isinstance(config.api_key, Secret) and config.api_key.reveal() == SENTINEL_KEY


def test_a_remote_endpoint_without_a_key_is_refused(tmp_path, monkeypatch):
    for name in ("SCM_XL_API_KEY", "SILICONFLOW_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UsageError, match="no API key"):
        collect(tmp_path, "https://api.example.invalid/v1")


def test_api_key_never_appears_in_any_output(tmp_path, monkeypatch, caplog, capfd):
    """A hostile server echoes the Authorization header back in errors and in the stream."""
    monkeypatch.setenv("SCM_XL_API_KEY", SENTINEL_KEY)
    seen_headers = []

    async def echo(reader, writer):
        try:
            while True:
                head = await read_request(reader)
                auth = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"authorization"))
                seen_headers.append(auth)
                if len(seen_headers) % 3 == 1:
                    body = b'{"error": "bad key ' + auth + b'"}'
                    writer.write(b"HTTP/1.1 500 Oops\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body))
                elif len(seen_headers) % 3 == 2:
                    event = "data: " + json.dumps({"error": {"message": auth.decode()}}) + "\n\n"
                    writer.write(SSE_HEAD + sse_chunk(event) + b"0\r\n\r\n")
                else:
                    writer.write(SSE_HEAD + sse_chunk("data: {broken " + auth.decode() + "\n\n") + b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    caplog.set_level(logging.DEBUG)
    out = tmp_path / "out"
    out.mkdir()
    with raw_server(echo) as base_url:
        result = CliRunner().invoke(main, ["collect", "--base-url", base_url, "-c", "1,2", "--max-tokens", "3",
                                           "-n", "3", "--out", str(out / "results.csv")])
    assert result.exit_code == 1, result.output  # no request succeeded
    assert "had no successful request" in result.output
    assert seen_headers and all(SENTINEL_KEY.encode() in h for h in seen_headers)  # it was sent
    captured = capfd.readouterr()
    texts = [result.output, captured.out, captured.err, caplog.text]
    texts += [path.read_text() for path in out.iterdir()]
    assert len(texts) == 6
    assert all(SENTINEL_KEY not in text for text in texts)
    assert "***" in (out / "requests.csv").read_text()  # the echoed key was redacted


# -- command line ---------------------------------------------------------------------------------


def test_collect_help():
    result = CliRunner().invoke(main, ["collect", "--help"])
    assert result.exit_code == 0
    for option in ("--matrix", "--base-url", "--model", "--concurrency", "--max-tokens", "--repeats",
                   "--requests-per-slot", "--warmup", "--ignore-eos", "--min-tokens", "--resume",
                   "--api-key-file", "--max-retry-after", "--quiet", "--out"):
        assert option in result.output


def test_collect_command_with_matrix_file_and_overrides(tmp_path, sim):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(f'base_url = "{sim}"\nmodels = ["a", "b"]\nconcurrency = [1, 8]\nmax_tokens = [3]\n'
                      "requests_per_slot = 2\n")
    result = CliRunner().invoke(main, ["collect", "--matrix", str(matrix), "-c", "2",
                                       "--out", str(tmp_path / "results.csv")])
    assert result.exit_code == 0, result.output
    rows = read_results(tmp_path / "results.csv").rows
    assert [(row.model, row.concurrency, row.requests_per_slot) for row in rows] == [("a", 2, 2), ("b", 2, 2)]
    assert "scm-xl collect: 2 experiment(s)" in result.output
    assert "TPS" in result.output


def test_collect_command_errors(tmp_path, sim):
    bad = tmp_path / "bad.toml"
    bad.write_text("speed = 3\n")
    result = CliRunner().invoke(main, ["collect", "--matrix", str(bad)])
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {bad}: unknown key 'speed'")
    args = ["collect", "--base-url", sim, "-c", "1", "--max-tokens", "2", "-n", "1", "-q",
            "--out", str(tmp_path / "results.csv")]
    assert CliRunner().invoke(main, args).exit_code == 0
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 2
    assert "already exists: pass --resume" in again.output
    assert CliRunner().invoke(main, [*args, "--resume"]).exit_code == 0
    result = CliRunner().invoke(main, ["collect", "-c", "1,x"])
    assert result.exit_code == 2 and "comma-separated integers" in result.output


@pytest.mark.slow
def test_ctrl_c_leaves_valid_files_and_resume_finishes(tmp_path):
    """A real SIGINT to `scm-xl collect` in a subprocess."""
    import signal
    import subprocess
    import sys
    import time

    results = tmp_path / "results.csv"
    with running_simulator(SimConfig(ttft_s=0.01, itl_s=0.01)) as base_url:
        args = [sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())", "collect",
                "--base-url", base_url, "-c", "1,2,3,4", "--max-tokens", "10,20", "-n", "2",
                "--out", str(results)]
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 30
        while not (results.exists() and results.read_text().count("\n") >= 3) and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        assert "run again with --resume" in err
        first = read_results(results)
        assert first.warnings == [] and 2 <= len(first.rows) < 8
        resumed = subprocess.run([*args, "--resume", "-q"], capture_output=True, text=True, env=env, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
    final = read_results(results)
    assert len(final.rows) == 8
    assert len(requests_of(tmp_path)) == sum(row.total_requests for row in final.rows)
