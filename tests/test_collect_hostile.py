"""`scm-xl collect` against hostile servers, inputs and files (issue 20): impossible usage counts,
--resume after a half-failed experiment, keys and model names refused before any traffic, and
shards that are empty, missing or of another matrix. Real HTTP on 127.0.0.1 only.
"""

from __future__ import annotations

import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.collect import CollectConfig
from scm_xl.collect.config import MAX_KEY_FILE_BYTES
from scm_xl.collect.matrix import MAX_MATRIX_BYTES
from scm_xl.collect.records import SUPERSEDED_MARK, USAGE_TOKENS_PER_CHUNK
from scm_xl.errors import InputError, UsageError
from scm_xl.results import MAX_CELL_CODE, RESULT_COLUMNS, read_results, read_results_many
from scm_xl.rules import MAX_CONCURRENCY, MAX_EXPERIMENT_REQUESTS, MAX_EXPERIMENTS
from scm_xl.simulator import SimConfig, running_simulator
from support.servers import SENTINEL_KEY, SSE_HEAD, STREAM, collect, counting, raw_server, read_request, requests_of, \
    run_cli, sse_chunk, token_event


def lying_stream(completion_tokens: int, words: int = 2) -> bytes:
    """A complete stream of `words` content chunks whose usage claims `completion_tokens`."""
    usage = "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 5,
                                                            "completion_tokens": completion_tokens}}) + "\n\n"
    events = [token_event(f"w{i}") for i in range(words)] + [usage, "data: [DONE]\n\n"]
    return SSE_HEAD + b"".join(sse_chunk(event) for event in events) + b"0\r\n\r\n"


# -- impossible usage (review item 4) ------------------------------------------------------------


@pytest.mark.parametrize("claimed, max_tokens", [
    (10 ** 12, 8),  # beyond max_tokens, and beyond any tokens-per-chunk
    (3 * USAGE_TOKENS_PER_CHUNK, 1000),  # within max_tokens, but far more than 2 chunks can carry
    (-5, 8),  # no count at all
])
def test_usage_that_contradicts_the_stream_is_flagged_and_not_counted(tmp_path, claimed, max_tokens):
    handle, _ = counting(lying_stream(claimed))
    with raw_server(handle) as base_url:
        report = collect(tmp_path, base_url, concurrency=(1,), max_tokens=(max_tokens,))
    row = read_results(tmp_path / "results.csv").rows[0]
    assert row.total_output_tokens == 2 * 2  # the chunks counted, not the claim
    assert row.failed_requests == 2 and row.ok_requests == 0
    assert "usage contradicted the stream for 2 request(s)" in row.notes
    records = requests_of(tmp_path)
    assert {(r["status"], r["error_class"], r["completion_tokens"], r["tokens_counted"]) for r in records} == {
        ("failed", "bad_usage", "2", "true")}
    assert f"usage.completion_tokens {claimed}" in records[0]["error"]
    assert report.failed_experiments == {"E001": {"bad_usage": 2}}


def test_usage_the_stream_can_carry_is_kept(tmp_path):
    handle, _ = counting(lying_stream(2 * USAGE_TOKENS_PER_CHUNK))  # several tokens per chunk: possible
    with raw_server(handle) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), max_tokens=(1000,))
    row = read_results(tmp_path / "results.csv").rows[0]
    assert row.ok_requests == 2 and row.total_output_tokens == 2 * 2 * USAGE_TOKENS_PER_CHUNK
    assert {r["tokens_counted"] for r in requests_of(tmp_path)} == {"false"}


# -- --resume after a half-failed experiment (review item 6) -------------------------------------


def dying_after(ok: int):
    """A raw_server handler answering its first `ok` requests with a stream, then HTTP 500s."""
    served: list[bytes] = []
    error = b"HTTP/1.1 500 X\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\ndead"

    async def handle(reader, writer):
        while True:
            served.append(await read_request(reader))
            writer.write(STREAM if len(served) <= ok else error)
            await writer.drain()

    return handle


def test_resume_runs_a_half_failed_experiment_again_and_keeps_its_old_requests(tmp_path):
    args = ["-m", "m", "-c", "1,2", "--max-tokens", "2", "-n", "3", "--out", str(tmp_path / "results.csv")]
    # the pre-flight, E001's 3 requests and 2 of E002's 6 succeed; then the server "dies"
    with raw_server(dying_after(1 + 3 + 2)) as base_url:
        assert run_cli(["--base-url", base_url, *args, "-q"]).exit_code == 0
    first = {row.exp_id: row for row in read_results(tmp_path / "results.csv").rows}
    assert (first["E002"].ok_requests, first["E002"].failed_requests) == (2, 4)
    with running_simulator(SimConfig.zero_delay()) as base_url:
        result = run_cli(["--base-url", base_url, *args, "--resume"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "ran again 1 experiment(s) in which more than 10% of the requests had failed: E002 (4 of 6 failed)" in said
    assert f"E002{SUPERSEDED_MARK}1" in said
    rows = read_results(tmp_path / "results.csv").rows
    assert [(row.exp_id, row.ok_requests, row.failed_requests) for row in rows] == [("E001", 3, 0), ("E002", 6, 0)]
    records = requests_of(tmp_path)
    old = [r for r in records if r["exp_id"] == f"E002{SUPERSEDED_MARK}1"]
    assert sorted(r["status"] for r in old) == ["failed"] * 4 + ["ok"] * 2  # the earlier attempt, kept
    assert len([r for r in records if r["exp_id"] == "E002"]) == 6
    assert len([r for r in records if r["exp_id"] == "E001"]) == 3
    # a second resume has nothing to do and keeps the superseded rows
    with running_simulator(SimConfig.zero_delay()) as base_url:
        assert run_cli(["--base-url", base_url, *args, "--resume", "-q"]).exit_code == 0
    assert requests_of(tmp_path) == records


# -- checks before any traffic (review items 17 and 18) ------------------------------------------


@pytest.mark.parametrize("extra, env, problem", [
    ([], {"SCM_XL_API_KEY": "sk-caf\u00e9-" + SENTINEL_KEY}, "the API key from $SCM_XL_API_KEY contains a "
                                                              "non-ASCII character"),
    ([], {"OPENAI_API_KEY": "\u201c" + SENTINEL_KEY + "\u201d"}, "non-ASCII character"),
    (["-m", "bad\x01name"], {}, "control character U+0001"),
    (["-m", "ok", "-m", "tab\tname"], {}, "control character U+0009"),
    (["--gpu", "H100\x1b[31m"], {}, "control character U+001B"),
    # sizes beyond what scm-xl runs (one home: scm_xl.rules): once an OverflowError after the pre-flight
    (["-c", "99999999999999999999"], {}, f"concurrency 99,999,999,999,999,999,999 is above {MAX_CONCURRENCY:,}"),
    (["-c", f"1,{MAX_CONCURRENCY + 1}"], {}, f"concurrency {MAX_CONCURRENCY + 1:,} is above {MAX_CONCURRENCY:,}"),
    # levels whose workbook cell codes the results reader refuses: once collected, then refused by fill
    (["--max-tokens", str(10 ** 14)], {}, f"only below {MAX_CELL_CODE:.0e} ({MAX_CELL_CODE:,}), so fill would refuse"),
])
def test_refused_before_any_request(tmp_path, extra, env, problem):
    handle, heads = counting()
    with raw_server(handle) as base_url:
        args = ["--base-url", base_url, "-c", "1", "--max-tokens", "2", "-n", "1", "-q",
                "--out", str(tmp_path / "results.csv")]
        if "-m" not in extra:
            args += ["-m", "m"]
        result = run_cli(args + extra, env=env)
    assert result.exit_code == 2, result.output
    assert problem in " ".join(result.output.split())
    assert "Traceback" not in result.output and SENTINEL_KEY not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert heads == []  # not one request
    assert list(tmp_path.iterdir()) == []


def test_a_non_ascii_key_from_a_file_or_the_library_is_refused(tmp_path):
    key_file = tmp_path / "key.txt"
    key_file.write_text(f"sk-\u00a0{SENTINEL_KEY}", encoding="utf-8")  # a pasted no-break space
    out = tmp_path / "out"
    out.mkdir()
    handle, heads = counting()
    with raw_server(handle) as base_url:
        result = run_cli(["--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "2", "-n", "1", "-q",
                          "--out", str(out / "results.csv"), "--api-key-file", str(key_file)])
    assert result.exit_code == 2, result.output
    assert f"the API key from the API key file {key_file} contains a non-ASCII character" in \
        " ".join(result.output.split())
    assert SENTINEL_KEY not in result.output and heads == [] and list(out.iterdir()) == []
    with pytest.raises(UsageError, match="non-ASCII") as caught:
        CollectConfig(api_key=f"sk-\u00e9{SENTINEL_KEY}")
    assert SENTINEL_KEY not in str(caught.value)


# -- shards (review item 21) ---------------------------------------------------------------------


def test_an_empty_shard_is_refused_before_any_request(tmp_path):
    handle, heads = counting()
    with raw_server(handle) as base_url:
        result = run_cli(["--base-url", base_url, "-m", "m", "-c", "1,2,3", "--max-tokens", "2,3,4,5", "-n", "1",
                          "-q", "--shard", "13/20", "--out", str(tmp_path / "results.csv")])
    assert result.exit_code == 2, result.output
    assert "--shard 13/20 has no experiments: the matrix has 12" in " ".join(result.output.split())
    assert heads == [] and list(tmp_path.iterdir()) == []


def run_shard(tmp_path: Path, base_url: str, shard: str, concurrency: str, name: str) -> Path:
    out = tmp_path / f"{name}.csv"
    result = run_cli(["--base-url", base_url, "-m", "m", "-c", concurrency, "--max-tokens", "2", "-n", "1", "-q",
                      "--shard", shard, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_shards_record_their_matrix_and_a_missing_shard_is_named(tmp_path):
    with running_simulator(SimConfig.zero_delay()) as base_url:
        first = run_shard(tmp_path, base_url, "1/3", "1,2,3", "s1")
        third = run_shard(tmp_path, base_url, "3/3", "1,2,3", "s3")
        whole = tmp_path / "whole"
        whole.mkdir()
        assert run_cli(["--base-url", base_url, "-m", "m", "-c", "1,2,3", "--max-tokens", "2", "-n", "1", "-q",
                        "--out", str(whole / "results.csv")]).exit_code == 0
    header = first.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert tuple(header) == RESULT_COLUMNS and header[header.index("matrix_id") + 1] == "shard"
    one, three = read_results(first).rows, read_results(third).rows
    unsharded = read_results(whole / "results.csv").rows
    assert [(r.exp_id, r.shard) for r in one + three] == [("E001", "1/3"), ("E003", "3/3")]
    assert {r.matrix_id for r in one + three + unsharded} == {one[0].matrix_id}  # the matrix, not the shard
    assert {r.shard for r in unsharded} == {None}
    table = read_results_many([first, third])
    assert len(table.rows) == 2
    missing = [w for w in table.warnings if "missing" in w]
    assert len(missing) == 1 and "shard 2/3" in missing[0] and "1/3" in missing[0] and "3/3" in missing[0]
    assert str(first) in missing[0] and str(third) in missing[0]


def test_a_shard_of_another_matrix_is_refused_naming_both_files(tmp_path):
    with running_simulator(SimConfig.zero_delay()) as base_url:
        ours = run_shard(tmp_path, base_url, "1/2", "1,2", "ours")
        theirs = run_shard(tmp_path, base_url, "2/2", "1,4", "theirs")  # E002 is c=4 there, c=2 here
    with pytest.raises(InputError) as caught:
        read_results_many([ours, theirs])
    message = str(caught.value)
    assert str(ours) in message and str(theirs) in message and "another matrix" in message


def test_complete_shards_and_older_csvs_read_together_without_a_word(tmp_path):
    with running_simulator(SimConfig.zero_delay()) as base_url:
        shards = [run_shard(tmp_path, base_url, f"{i}/2", "1,2", f"s{i}") for i in (1, 2)]
    older = tmp_path / "older.csv"  # written before the two columns existed
    header = [c for c in RESULT_COLUMNS if c not in ("matrix_id", "shard")]
    older.write_text(",".join(header) + "\n" + ",".join(
        {"exp_id": "X1", "model": "m", "concurrency": "1", "requests_per_slot": "1", "total_requests": "1",
         "max_tokens": "2", "total_time_s": "1", "total_output_tokens": "2"}.get(c, "") for c in header) + "\n",
        encoding="utf-8")
    table = read_results_many([*shards, older])
    assert len(table.rows) == 3 and table.warnings == []


@pytest.mark.parametrize("cell", ["3", "0/2", "3/2", "a/b"])
def test_a_bad_shard_cell_is_refused_naming_line_and_column(tmp_path, cell):
    path = tmp_path / "results.csv"
    path.write_text("exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens,total_time_s,"
                    f"total_output_tokens,shard\nE1,m,1,1,1,2,1,2,{cell}\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"{path}:2: shard: .*k/n"):
        read_results(path)


def test_resume_adds_the_new_columns_to_a_csv_written_before_them(tmp_path):
    results = tmp_path / "results.csv"
    with running_simulator(SimConfig.zero_delay()) as base_url:
        def run(concurrency: str, *extra: str):
            return run_cli(["--base-url", base_url, "-m", "m", "-c", concurrency, "--max-tokens", "2", "-n", "1",
                            "-q", "--out", str(results), *extra])

        assert run("1").exit_code == 0  # E001
        with open(results, encoding="utf-8", newline="") as handle:
            records = list(csv.reader(handle))
        first_new = records[0].index("matrix_id")  # matrix_id, shard and the rate-limit columns came later
        assert records[0][first_new:first_new + 2] == ["matrix_id", "shard"]
        with open(results, "w", encoding="utf-8", newline="") as handle:  # as an older scm-xl wrote it
            csv.writer(handle, lineterminator="\n").writerows(record[:first_new] for record in records)
        result = run("1,2", "--resume")
    assert result.exit_code == 0, result.output
    assert results.read_text(encoding="utf-8").splitlines()[0] == ",".join(RESULT_COLUMNS)
    rows = read_results(results).rows
    assert [(r.exp_id, r.matrix_id is None) for r in rows] == [("E001", True), ("E002", False)]


def test_a_key_file_saved_with_a_bom_works_and_one_not_in_utf_8_is_refused(tmp_path):
    key_file = tmp_path / "key.txt"
    key_file.write_bytes(b"\xef\xbb\xbf" + SENTINEL_KEY.encode() + b"\r\n")  # Notepad's "UTF-8"
    out = tmp_path / "out"
    out.mkdir()
    handle, heads = counting()
    with raw_server(handle) as base_url:
        args = ["--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "2", "-n", "1", "-q",
                "--out", str(out / "results.csv"), "--api-key-file", str(key_file)]
        assert run_cli(args).exit_code == 0
        assert all(f"authorization: Bearer {SENTINEL_KEY}\r\n".encode() in head for head in heads)
        sent = len(heads)
        key_file.write_bytes(SENTINEL_KEY.encode("utf-16"))  # Notepad's "Unicode"
        result = run_cli([*args, "--force"])
    assert result.exit_code == 2, result.output
    assert f"{key_file}: the API key file is not UTF-8 text" in " ".join(result.output.split())
    assert "Traceback" not in result.output and len(heads) == sent


def test_a_reasoning_models_csv_is_read_by_fill_though_its_output_passes_max_tokens(tmp_path):
    """A reasoning API may not count reasoning against max_tokens: the collector keeps such usage
    (reasoning chunks streamed) and notes it, and the reader must then accept more output than
    max_tokens x requests (it refuses that only for rows without the note)."""
    reasoning = "data: " + json.dumps({"choices": [{"index": 0, "delta": {"reasoning_content": "think"},
                                                     "finish_reason": None}]}) + "\n\n"
    usage = "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 20}}) + "\n\n"
    events = [reasoning] * 6 + [token_event("w0"), token_event("w1"), usage, "data: [DONE]\n\n"]
    handle, _ = counting(SSE_HEAD + b"".join(sse_chunk(event) for event in events) + b"0\r\n\r\n")
    with raw_server(handle) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), max_tokens=(4,))
    row = read_results(tmp_path / "results.csv").rows[0]  # read back as fill reads it: no refusal
    assert row.ok_requests == 2 and row.total_output_tokens == 40 > 4 * 2
    assert "reasoning: 2 request(s) streamed reasoning" in row.notes


def test_a_prompts_file_that_is_a_device_is_refused_unread():
    """--prompts /dev/zero would be read until memory runs out: refused like every other input."""
    from scm_xl.collect.prompts import load_prompts

    with pytest.raises(InputError, match="/dev/zero"):
        load_prompts("/dev/zero")


# -- inputs without end, and sizes without bound (issue 20's audit, items B and C) ---------------

SCM_XL = str(Path(sys.executable).with_name("scm-xl"))
NO_KEY_ENV = {name: value for name, value in os.environ.items()
              if name not in ("SCM_XL_API_KEY", "SILICONFLOW_API_KEY", "OPENAI_API_KEY")}


def _limited(cap: int = 3 << 30) -> None:
    """A child that would read or allocate without end fails within seconds instead of taking the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def collect_limited(base_url: str, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    """`scm-xl collect` of one tiny experiment as a child under a memory cap; its result and seconds."""
    started = time.monotonic()
    done = subprocess.run([SCM_XL, "collect", "--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "2",
                           "-n", "1", "-q", "--out", str(out / "results.csv"), *extra], capture_output=True,
                          text=True, timeout=120, preexec_fn=_limited, env=NO_KEY_ENV)
    return done, time.monotonic() - started


@pytest.mark.parametrize("option", ["--api-key-file", "--matrix"])
@pytest.mark.parametrize("source", ["/dev/zero", "a 300 MB file"])
def test_a_key_file_or_matrix_without_end_is_refused_unread(tmp_path, option, source):
    """Both were read whole: /dev/zero until memory ran out (a MemoryError traceback), a 300 MB key
    file for half a minute. Now: a regular file of at most a cap (scm_xl.input_files), at once."""
    if source == "/dev/zero":
        if not os.path.exists(source):
            pytest.skip("no /dev/zero")
        path, says = source, f"{source}: " + ("cannot read the API key file: " if option == "--api-key-file" else "") \
            + "not a regular file (a character device)"
    else:
        path = str(tmp_path / "big")
        with open(path, "wb") as handle:
            handle.write(SENTINEL_KEY.encode() + b"\n")  # the key, then 300 MB (sparse: no disk, no time)
            handle.truncate(300 * 10 ** 6)
        cap = "64 KiB" if option == "--api-key-file" else "16 MiB"
        assert (MAX_KEY_FILE_BYTES, MAX_MATRIX_BYTES) == (64 * 1024, 16 * 1024 * 1024)
        says = f"{path}: " + ("cannot read the API key file: " if option == "--api-key-file" else "") + \
            f"refused: larger than {cap}, the most scm-xl reads of "
    out = tmp_path / "out"
    out.mkdir()
    handle, heads = counting()
    with raw_server(handle) as base_url:
        done, seconds = collect_limited(base_url, out, option, path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert says in " ".join(done.stderr.split()), done.stderr[-3000:]
    assert "Traceback" not in done.stderr and SENTINEL_KEY not in done.stdout + done.stderr
    assert heads == [] and list(out.iterdir()) == []
    assert seconds < 30


@pytest.mark.parametrize("extra, problem", [
    (["-n", "99999999999999999999"], f"sends 99,999,999,999,999,999,999 requests, above {MAX_EXPERIMENT_REQUESTS:,}"),
    (["-c", "1000", "-n", "1001"], f"sends 1,001,000 requests, above {MAX_EXPERIMENT_REQUESTS:,}"),
    (["--warmup", "99999999999999999999"], "and 99,999,999,999,999,999,999 warm-up requests"),
    (["-r", "99999999999999999999"], f"experiments, above {MAX_EXPERIMENTS:,}, the most scm-xl runs in one"),
])
def test_sizes_that_would_fill_memory_are_refused_before_any_request(tmp_path, extra, problem):
    """Each of these once went through the pre-flight and then allocated a record per request (or
    a point per experiment) until the machine ran out of memory; now refused with the limit named."""
    handle, heads = counting()
    with raw_server(handle) as base_url:
        done, seconds = collect_limited(base_url, tmp_path, *extra)
    assert done.returncode == 2, done.stderr[-3000:]
    assert problem in " ".join(done.stderr.split()), done.stderr[-3000:]
    assert "Traceback" not in done.stderr and heads == [] and list(tmp_path.iterdir()) == []
    assert seconds < 30


def test_a_plan_with_a_concurrency_beyond_the_limit_is_refused_naming_the_file(tmp_path):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('[[experiments]]\nexp_id = "E001"\nmodel = "m"\nconcurrency = 99999999999999999999\n'
                      "max_tokens = 2\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    handle, heads = counting()
    with raw_server(handle) as base_url:
        result = run_cli(["--base-url", base_url, "--matrix", str(matrix), "-n", "1", "-q",
                          "--out", str(out / "results.csv")])
    assert result.exit_code == 2, result.output
    assert f"{matrix}: experiment 1: 'concurrency' 99,999,999,999,999,999,999 is above {MAX_CONCURRENCY:,}" in \
        " ".join(result.output.split())
    assert heads == [] and list(out.iterdir()) == []


@pytest.mark.parametrize("extra, problem", [
    (["-c", "99999999999999999999"], f"concurrency 99,999,999,999,999,999,999 is above {MAX_CONCURRENCY:,}"),
    (["-c", "1000", "-n", "1001"], f"sends 1,001,000 requests, above {MAX_EXPERIMENT_REQUESTS:,}"),
    (["--max-tokens", str(10 ** 14)], f"below {MAX_CELL_CODE:.0e} ({MAX_CELL_CODE:,}), so fill would refuse"),
])
def test_plan_refuses_a_matrix_collect_would_refuse_and_writes_nothing(tmp_path, extra, problem):
    """`plan -c 99999999999999999999` wrote a matrix that collect then failed on after its pre-flight."""
    result = CliRunner().invoke(main, ["plan", *extra, "-o", str(tmp_path / "matrix.toml")])
    assert result.exit_code == 2, result.output
    assert problem in " ".join(result.output.split()) and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_plan_refuses_repeats_without_bound_before_making_them(tmp_path):
    """`plan -r 10**12` made a trillion experiments in memory before it wrote anything."""
    from scm_xl.workbook.io import MAX_DATA_ROWS

    assert MAX_EXPERIMENTS == MAX_DATA_ROWS  # the limit's reason: as many as one workbook holds
    started = time.monotonic()
    done = subprocess.run([SCM_XL, "plan", "-r", str(10 ** 12), "-o", str(tmp_path / "matrix.toml")],
                          capture_output=True, text=True, timeout=120, preexec_fn=_limited)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"above {MAX_EXPERIMENTS:,}, the most scm-xl runs in one" in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []
    assert time.monotonic() - started < 30


# -- one shard alone (issue 20's audit, item D) --------------------------------------------------


def test_one_shard_alone_names_the_missing_shards_as_several_do(tmp_path):
    """`fill s1.csv` of shard 1/3 said nothing of 2/3 and 3/3: the single-file reader returned
    before the check of shards. The words are those of several files read together."""
    with running_simulator(SimConfig(ttft_s=0.001, itl_s=0.001)) as base_url:  # an ITL above 0 for fill's latency fit
        first = run_shard(tmp_path, base_url, "1/3", "1,2,3,4,5,6", "s1")
        second = run_shard(tmp_path, base_url, "2/3", "1,2,3,4,5,6", "s2")
    matrix = read_results(first).rows[0].matrix_id
    tail = "these results cover part of the matrix only"
    alone = [f"shard {k}/3 of matrix {matrix} is missing (have 1/3 in {first}): {tail}" for k in (2, 3)]
    assert [w for w in read_results(first).warnings if "missing" in w] == alone
    assert [w for w in read_results_many([first]).warnings if "missing" in w] == alone
    assert [w for w in read_results_many([first, second]).warnings if "missing" in w] == [
        f"shard 3/3 of matrix {matrix} is missing (have 1/3 in {first}, 2/3 in {second}): {tail}"]
    result = CliRunner().invoke(main, ["fill", str(first), "-o", str(tmp_path / "s1.xlsx"), "--lang", "en", "-q"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    said = " ".join(result.stderr.split())
    assert all(f"warning: {warning}" in said for warning in alone), result.stderr
    page = tmp_path / "s1.html"
    reported = CliRunner().invoke(main, ["report", str(first), "-o", str(page), "--lang", "en"])
    assert reported.exit_code == 0, reported.output
    said = " ".join(reported.stderr.split())
    assert all(f"warning: {warning}" in said for warning in alone), reported.stderr  # report says it too
