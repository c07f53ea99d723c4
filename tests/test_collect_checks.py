"""`scm-xl collect` before, around and after its traffic: the pre-flight request, the checks
made before any request, --shard, the exit code when requests all failed, progress and the
summary table. Real HTTP on 127.0.0.1 only; every "nothing sent" claim is counted at the server.
"""

from __future__ import annotations

import asyncio
import io
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.collect import CollectConfig, CollectionReport, load_matrix_file, matrix_points, run_collection
from scm_xl.collect.progress import summary_table
from scm_xl.errors import UsageError
from scm_xl.plan import make_plan, write_plan
from scm_xl.results import read_results
from scm_xl.simulator import SimConfig, running_simulator
from support.servers import NO_KEYS, SENTINEL_KEY, answer, counting, raw_server, requests_of, run_cli, wide_row


def small(base_url: str, out: Path, *extra: str) -> list[str]:
    return ["--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "2", "-n", "1", "-q",
            "--out", str(out / "results.csv"), *extra]


# -- pre-flight ---------------------------------------------------------------------------------


def test_closed_port_exits_2_and_writes_nothing(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_cli(small(f"http://127.0.0.1:{port}/v1", tmp_path))
    assert result.exit_code == 2, result.output
    assert "pre-flight request failed: cannot reach" in result.output and "connect_error" in result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_names_its_variable_never_the_key(tmp_path, status):
    handle, heads = counting(answer(status, {"error": {"message": "invalid api key"}}))
    with raw_server(handle) as base_url:
        result = run_cli(small(base_url, tmp_path), env={"SILICONFLOW_API_KEY": SENTINEL_KEY})
    assert result.exit_code == 2, result.output
    assert f"HTTP {status}: the server refused the API key; the API key came from $SILICONFLOW_API_KEY" in result.output
    assert SENTINEL_KEY not in result.output
    assert len(heads) == 1 and list(tmp_path.iterdir()) == []


def test_a_refused_key_from_a_file_names_the_file(tmp_path):
    key_file = tmp_path / "key.txt"
    key_file.write_text(SENTINEL_KEY)
    out = tmp_path / "out"
    out.mkdir()
    handle, _ = counting(answer(401, {"error": "no"}))
    with raw_server(handle) as base_url:
        result = run_cli(small(base_url, out, "--api-key-file", str(key_file)))
    assert result.exit_code == 2 and f"the file {key_file}" in result.output
    assert SENTINEL_KEY not in result.output and list(out.iterdir()) == []


def test_no_key_and_a_401_says_which_variables(tmp_path):
    handle, _ = counting(answer(401, {"error": "missing key"}))
    with raw_server(handle) as base_url:
        result = run_cli(small(base_url, tmp_path))
    assert result.exit_code == 2 and "no API key was sent (set SCM_XL_API_KEY" in result.output


def test_an_unknown_model_exits_2(tmp_path):
    with running_simulator(SimConfig.zero_delay(model_name="served", strict_model=True)) as base_url:
        result = run_cli(["--base-url", base_url, "-m", "served", "-m", "typo", "-c", "1", "--max-tokens", "2",
                          "-n", "1", "-q", "--out", str(tmp_path / "results.csv")])
    assert result.exit_code == 2, result.output
    assert "HTTP 404 for model 'typo'" in result.output and "does not exist" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_does_not_stream_exits_2(tmp_path):
    handle, _ = counting(answer(200, {"choices": [{"message": {"content": "hi"}}]}))
    with raw_server(handle) as base_url:
        result = run_cli(small(base_url, tmp_path))
    assert result.exit_code == 2 and "the server does not stream" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_failed_pre_flight_leaves_existing_files_as_they_were(tmp_path, ):
    (tmp_path / "results.csv").write_text("precious\n")
    (tmp_path / "requests.csv").write_text("precious too\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_cli(small(f"http://127.0.0.1:{port}/v1", tmp_path, "--force"))
    assert result.exit_code == 2
    assert (tmp_path / "results.csv").read_text() == "precious\n"
    assert (tmp_path / "requests.csv").read_text() == "precious too\n"


def test_server_errors_do_not_stop_the_pre_flight_but_make_the_exit_1(tmp_path):
    with running_simulator(SimConfig.zero_delay(error_rate=1.0)) as base_url:
        result = run_cli(["--base-url", base_url, "-m", "m", "-c", "1,2", "--max-tokens", "2", "-n", "2",
                          "--out", str(tmp_path / "results.csv")])
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "E001: all 2 requests failed (http_5xx 2)." in output
    assert "E002: all 4 requests failed (http_5xx 4)." in output
    assert "Error: 2 of 2 experiment(s) had no successful request (http_5xx 6)" in output
    assert len(read_results(tmp_path / "results.csv").rows) == 2  # the rows are kept, with their notes


# -- checks before any request -----------------------------------------------------------------


@pytest.mark.parametrize("extra, env, problem", [
    (["--out", "{tmp}/missing/results.csv"], {}, "the folder {tmp}/missing does not exist"),
    (["--requests-out", "{tmp}/results.csv"], {}, "are the same file"),
    (["-m", "qwen*"], {}, "contains '*', which acts as a wildcard"),
    (["-m", "=cmd"], {}, "starts with '=', which acts as a comparison operator"),
    (["-m", "7"], {}, "is a number"),
    (["-m", "Qwen", "-m", "qwen"], {}, "differ only in case"),
    (["-m", "a", "-m", "a"], {}, "listed twice"),
    ([], {"SCM_XL_API_KEY": "sk-abc\r\nX-Injected: yes"}, "contains a control character"),
    (["--shard", "4/3"], {}, "--shard must be i/n"),
])
def test_refused_before_any_request(tmp_path, extra, env, problem):
    handle, heads = counting()
    with raw_server(handle) as base_url:
        args = ["--base-url", base_url, "-c", "1", "--max-tokens", "2", "-n", "1", "-q",
                "--out", str(tmp_path / "results.csv")]
        extra = [part.replace("{tmp}", str(tmp_path)) for part in extra]
        if not any(part in ("-m",) for part in extra):
            args += ["-m", "m"]
        result = run_cli(args + extra, env=env)
    assert result.exit_code == 2, result.output
    assert problem.replace("{tmp}", str(tmp_path)) in result.output
    assert "Traceback" not in result.output and "X-Injected" not in result.output
    assert heads == []  # not one request
    assert list(tmp_path.iterdir()) == []


def test_a_key_with_control_characters_is_refused_in_the_library():
    with pytest.raises(UsageError, match="control character"):
        CollectConfig(api_key="sk\nX-Injected: yes")


@pytest.mark.parametrize("text", ["name,value\nx,1\n", "exp_id;model;concurrency\nE001;m;1\n"])
def test_resume_onto_a_csv_that_is_not_scm_xls(tmp_path, text):
    results = tmp_path / "results.csv"
    results.write_text(text)
    handle, heads = counting()
    with raw_server(handle) as base_url:
        result = run_cli(small(base_url, tmp_path, "--resume"))
    assert result.exit_code == 2 and "cannot resume: not a results CSV written by scm-xl" in result.output
    assert heads == [] and results.read_text() == text


def test_resume_onto_a_requests_csv_that_is_not_scm_xls(tmp_path):
    (tmp_path / "requests.csv").write_text("a,b\n1,2\n")
    handle, heads = counting()
    with raw_server(handle) as base_url:
        result = run_cli(small(base_url, tmp_path, "--resume"))
    assert result.exit_code == 2 and "not a requests CSV written by this version of scm-xl" in result.output
    assert heads == []


def test_resume_after_a_half_written_last_line(tmp_path):
    with running_simulator(SimConfig.zero_delay()) as base_url:
        args = ["--base-url", base_url, "-m", "m", "-c", "1,2,3", "--max-tokens", "2", "-n", "1", "-q",
                "--out", str(tmp_path / "results.csv")]
        assert run_cli(args).exit_code == 0
        results = tmp_path / "results.csv"
        lines = results.read_text().splitlines(keepends=True)
        results.write_text("".join(lines[:3]) + lines[3][:25])  # E003's row cut mid-line, as by kill -9
        result = CliRunner().invoke(main, ["collect", *args[:-3], "--out", str(results), "--resume"],
                                    env=NO_KEYS)
    assert result.exit_code == 0, result.output
    # rich wraps the line at the terminal width, even inside the path: compare without whitespace
    assert "".join(f"dropped the half-written last line ({results}:4)".split()) in "".join(result.output.split())
    table = read_results(results)
    assert [row.exp_id for row in table.rows] == ["E001", "E002", "E003"] and table.warnings == []
    assert sorted({r["exp_id"] for r in requests_of(tmp_path)}) == ["E001", "E002", "E003"]
    assert len(requests_of(tmp_path)) == 6


def test_experiments_in_which_every_request_failed_are_run_again_on_resume(tmp_path):
    args = ["-m", "m", "-c", "1,2", "--max-tokens", "2", "-n", "1", "-q", "--out", str(tmp_path / "results.csv")]
    with running_simulator(SimConfig.zero_delay(error_rate=1.0)) as base_url:
        assert run_cli(["--base-url", base_url, *args]).exit_code == 1
    assert [row.ok_requests for row in read_results(tmp_path / "results.csv").rows] == [0, 0]
    with running_simulator(SimConfig.zero_delay()) as base_url:
        result = run_cli(["--base-url", base_url, *args, "--resume"])
    assert result.exit_code == 0, result.output
    rows = read_results(tmp_path / "results.csv").rows
    assert [(row.exp_id, row.ok_requests) for row in rows] == [("E001", 1), ("E002", 2)]
    records = requests_of(tmp_path)
    assert len(records) == 3 and {r["status"] for r in records} == {"ok"}  # the failed rows went too


# -- shards --------------------------------------------------------------------------------------


def test_shards_cover_a_plan_once_and_fill_together(tmp_path):
    plan = make_plan(models=("m",), concurrency=(1, 2), max_tokens=(2, 3), design="full", repeats=2,
                     requests_per_slot=1, seed=7)
    matrix = tmp_path / "matrix.toml"
    write_plan(plan, matrix)
    values = load_matrix_file(matrix)
    shards = [matrix_points(CollectConfig(**values, shard=(i, 3))) for i in (1, 2, 3)]
    everything = matrix_points(CollectConfig(**values))
    assert sorted(p.exp_id for shard in shards for p in shard) == sorted(p.exp_id for p in everything)
    assert [p.exp_id for p in shards[1]] == [p.exp_id for p in everything[1::3]]
    with running_simulator(SimConfig.zero_delay()) as base_url:
        for i in (1, 2, 3):
            result = run_cli(["--matrix", str(matrix), "--base-url", base_url, "--shard", f"{i}/3", "-q",
                              "--out", str(tmp_path / f"shard{i}.csv")])
            assert result.exit_code == 0, result.output
    ids = [row.exp_id for i in (1, 2, 3) for row in read_results(tmp_path / f"shard{i}.csv").rows]
    assert sorted(ids) == sorted(e.exp_id for e in plan.experiments)


@pytest.mark.parametrize("text", ["0/3", "4/3", "x", "1-3", "1/0"])
def test_bad_shards(text):
    result = run_cli(["--shard", text, "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "--shard must be i/n" in result.output


# -- progress and the summary ------------------------------------------------------------------


def test_progress_is_off_when_stderr_is_not_a_terminal_and_on_when_asked(tmp_path):
    with running_simulator(SimConfig.zero_delay()) as base_url:
        args = ["--base-url", base_url, "-m", "m", "-c", "1,2", "--max-tokens", "2", "-n", "1"]
        quiet = CliRunner().invoke(main, ["collect", *args, "--out", str(tmp_path / "a.csv")],
                                                   env=NO_KEYS)
        shown = CliRunner().invoke(main, ["collect", *args, "--out", str(tmp_path / "b.csv"),
                                                          "--progress"], env=NO_KEYS)
        silenced = CliRunner().invoke(main, ["collect", *args, "--out", str(tmp_path / "c.csv"),
                                                             "--no-progress"], env=NO_KEYS)
    assert quiet.exit_code == shown.exit_code == silenced.exit_code == 0
    assert "done: 2/2 experiments" in shown.stderr and shown.stderr.count("done:") == 1  # one bar for the run
    assert "experiments" not in quiet.stderr and "experiments" not in silenced.stderr
    assert "scm-xl collect: 2 experiment(s)" in quiet.stdout


def test_the_rate_is_the_experiments_so_far_never_a_flicker_to_zero():
    from scm_xl.collect.matrix import MatrixPoint
    from scm_xl.collect.progress import ProgressBar, RunCounters

    counters = RunCounters()
    points = [MatrixPoint("E001", "m", 2, 8, 1), MatrixPoint("E002", "m", 4, 8, 1)]
    bar = ProgressBar(points, 3, counters)
    bar.begin(points[0])
    assert bar.rate() == ""  # no request has ended yet: no figure rather than "0 tok/s"
    counters.requests, counters.tokens = 2, 16
    first = bar.rate()
    assert first.endswith(" tok/s") and first != "0 tok/s"
    bar.finished(None)
    bar.begin(points[1])  # a new experiment starts from its own counts
    assert bar.rate() == "" and bar.label.startswith("[2/2] E002 c=4")


def test_the_summary_fits_80_columns_and_cuts_no_value(tmp_path):
    from rich.console import Console

    report = CollectionReport(results_path=tmp_path / "results.csv", requests_path=tmp_path / "requests.csv")
    report.rows = [wide_row("E001-R12", "Qwen/Qwen2.5-72B-Instruct"), wide_row("E002-R1", "meta-llama/Llama-3.1-8B",
                                                                       latency_p50_s=None, latency_p99_s=None)]
    out = io.StringIO()
    Console(file=out, width=80).print(summary_table(report))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    for value in ("123,457", "123/4,568", "12,346/98,765", "1,235", "10000/200/40", "E001-R12", "1024", "16384",
                  "-/-", "m1 = Qwen/Qwen2.5-72B-Instruct", "m2 = meta-llama/Llama-3.1-8B"):
        assert value in text, value
    for unit in ("tok/s", "p50/p99 s", "p50/p99 ms", "ms", "ok/fail/429"):
        assert unit in text


def test_library_run_reports_failed_experiments(tmp_path):
    with running_simulator(SimConfig.zero_delay(error_rate=1.0)) as base_url:
        report = asyncio.run(run_collection(CollectConfig(
            base_url=base_url, models=("m",), concurrency=(1,), max_tokens=(2,), requests_per_slot=3,
            results_path=tmp_path / "results.csv")))
    assert dict(report.failed_experiments) == {"E001": {"http_5xx": 3}}
    assert report.problems()[0] == "E001: all 3 requests failed (http_5xx 3)."


# -- interrupted runs ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("signal_name, code", [("SIGTERM", 143), ("SIGKILL", -9)])
def test_sigterm_and_kill_9_leave_files_that_resume_finishes(tmp_path, signal_name, code):
    """A real signal to `scm-xl collect` in a subprocess, then --resume: every experiment once,
    every request row of it, none of the cut one."""
    import os
    import signal
    import subprocess
    import sys
    import time

    results = tmp_path / "results.csv"
    with running_simulator(SimConfig(ttft_s=0.01, itl_s=0.01)) as base_url:
        args = [sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())", "collect",
                "--base-url", base_url, "-c", "1,2,3,4", "--max-tokens", "10,20", "-n", "2", "-q",
                "--out", str(results)]
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 30
        while not (results.exists() and results.read_text().count("\n") >= 3) and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(getattr(signal, signal_name))
        _, err = process.communicate(timeout=30)
        assert process.returncode == code, err
        if signal_name == "SIGTERM":
            assert "run again with --resume" in err
        first = read_results(results)
        assert 2 <= len(first.rows) < 8
        resumed = subprocess.run([*args, "--resume"], capture_output=True, text=True, env=env, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
    final = read_results(results)
    assert sorted(row.exp_id for row in final.rows) == [f"E{i:03d}" for i in range(1, 9)]
    assert len(requests_of(tmp_path)) == sum(row.total_requests for row in final.rows)
