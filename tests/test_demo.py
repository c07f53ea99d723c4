"""The main job end to end: simulator on loopback, collect, fill, recalculate, verify."""

from __future__ import annotations

import asyncio
import csv
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import scm_xl.demo as demo_module
from scm_xl.cli import main
from scm_xl.demo import (DEMO_CONCURRENCY, DEMO_EFFICIENCY, DEMO_LONG_PROMPT, DEMO_MAX_TOKENS, DEMO_MODELS,
                         DEMO_SHORT_PROMPT, ceiling_tps, default_target_tps, run_demo)
from scm_xl.errors import InputError
from scm_xl.methods import default_questions
from scm_xl.results import read_results
from scm_xl.workbook.fill import analysis_from_source
from support import books
from support.cli import Started


@pytest.fixture(scope="module", autouse=True)
def demos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, Started]]]:
    """The two whole `scm-xl demo` runs this module reads (each about 14 s, nearly all of it waiting
    on its simulators), started as the module starts, each a process of its own, and read by the
    last two tests: they run beside each other and beside the module's other tests instead of
    one after another. Each one's output folder and its run."""
    english = tmp_path_factory.mktemp("demo-en") / "demo"
    chinese = tmp_path_factory.mktemp("demo-zh") / "demo"
    chinese.mkdir()
    (chinese / "keep.txt").write_text("not the demo's\n", encoding="utf-8")
    (chinese / "workbook.xlsx").write_bytes(b"old")
    runs = {"end_to_end": (english, Started("demo", "--out", english, "--target-tps", "200", "--lang", "en")),
            "chinese": (chinese, Started("demo", "--out", chinese, "--force", "--lang", "zh", "--show-unreachable"))}
    try:
        yield runs
    finally:
        for _, started in runs.values():
            started.stop()


def test_the_default_target_is_one_the_deployment_reaches() -> None:
    # Qwen2.5-7B on the A100 80GB at context 256: 2,039e9 B/s over 14,141,238,272 B read per token plus
    # 14.7 MB of KV = 143.99 tok/s; x 0.6 = 86.4 per stream; 3 streams = 259 -> 250 (concurrency 4 gives ~320)
    assert ceiling_tps("qwen2.5-7b") == pytest.approx(2039e9 / (2 * 7070619136 + 2 * 28 * 4 * 128 * 2 * 256))
    assert default_target_tps() == 250.0
    assert 2 * DEMO_EFFICIENCY * ceiling_tps("qwen2.5-7b") < default_target_tps() \
        < 4 * DEMO_EFFICIENCY * ceiling_tps("qwen2.5-7b")


def test_an_existing_output_folder_is_refused_without_force(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "results.csv").write_text("mine\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["demo", "--out", str(out)])
    assert result.exit_code == 2
    assert "already exists" in result.output and "--force" in result.output
    assert (out / "results.csv").read_text(encoding="utf-8") == "mine\n"  # nothing touched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no staging folder left behind
    result = CliRunner().invoke(main, ["demo", "--out", str(out / "results.csv")])
    assert result.exit_code == 2 and "is a file" in result.output


def _simulators() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "scm-xl-sim"}


@pytest.mark.slow
@pytest.mark.parametrize("failure", [InputError("the deployment went away"), KeyboardInterrupt()],
                         ids=["error", "ctrl-c"])
def test_one_collection_failing_stops_the_others_and_every_simulator(tmp_path: Path, failure: BaseException,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The three collections run at once; when one fails (or Ctrl-C lands in it) the other two are
    cancelled, all three simulators stop, and nothing is left: no output folder, no staging folder."""
    real = demo_module.run_collection
    cancelled: list[str] = []

    async def collect(config: Any, **kwargs: Any) -> Any:
        if config.prompt_tokens == (DEMO_LONG_PROMPT,):
            await asyncio.sleep(0.5)  # the other two are under way
            raise failure
        try:
            return await real(config, **kwargs)
        except asyncio.CancelledError:
            cancelled.append(config.models[0])
            raise

    monkeypatch.setattr(demo_module, "run_collection", collect)
    before = _simulators()
    with pytest.raises(type(failure)):
        run_demo(tmp_path / "demo")
    assert sorted(cancelled) == sorted(served for served, _ in DEMO_MODELS)  # one after another: neither was
    assert _simulators() == before
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_three_collect_leaves_nothing_behind(tmp_path: Path, signum: signal.Signals) -> None:
    """Ctrl-C or SIGTERM to `scm-xl demo` while all three collections run: it ends with 130 or 143,
    and leaves no output folder, no staging folder beside it and no temporary file."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["TMPDIR"] = str(temp)
    process = subprocess.Popen([sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())",
                                "demo", "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # each of the three collections has a finished experiment
            parts = [path for path in temp.rglob("results-*.csv") if not path.name.endswith(".requests.csv")]
            if len(parts) == 3 and all(path.read_text(encoding="utf-8").count("\n") >= 2 for path in parts):
                break
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], err
    assert "Traceback" not in err
    assert ("Interrupted." if signum == signal.SIGINT else "Terminated.") in err
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == ["tmp"], err


def test_a_forced_demo_whose_workbook_failed_never_pairs_new_results_with_an_old_workbook(tmp_path: Path) -> None:
    """--force into a folder of an earlier run, this run's verification failed (its workbook is
    workbook.failed.xlsx): the results and requests are replaced, the old workbook goes, the
    person's own file stays. It used to crash half-way (FileNotFoundError on workbook.xlsx)."""
    from scm_xl.demo import _put_in_place

    out, staging = tmp_path / "scm-demo", tmp_path / ".staging"
    out.mkdir()
    staging.mkdir()
    for name in ("results.csv", "requests.csv", "workbook.xlsx", "notes.txt"):
        (out / name).write_text(f"old {name}")
    for name in ("results.csv", "requests.csv", "workbook.failed.xlsx"):
        (staging / name).write_text(f"new {name}")
    _put_in_place(staging, out)
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "results.csv": "new results.csv", "requests.csv": "new requests.csv",
        "workbook.failed.xlsx": "new workbook.failed.xlsx", "notes.txt": "old notes.txt"}
    # and the next run that verifies takes the failed workbook away again
    for name in ("results.csv", "requests.csv", "workbook.xlsx"):
        (staging / name).write_text(f"newer {name}")
    _put_in_place(staging, out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "requests.csv", "results.csv", "workbook.xlsx"]


def test_a_demo_whose_workbook_fails_verification_names_the_file_it_left(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification finds one wrong cell: exit 1, and the last sentence names workbook.failed.xlsx, the
    file that is there, never a workbook.xlsx that is not."""
    from support.reports import one_wrong_cell

    one_wrong_cell(monkeypatch)
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--output", str(out), "--lang", "en"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in out.iterdir()) == ["requests.csv", "results.csv", "workbook.failed.xlsx"]
    lines = result.output.strip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("Wrote"))
    last = " ".join(line.strip() for line in lines[start:])  # the last sentence, however it wrapped
    assert str(out / "workbook.failed.xlsx") in last and str(out / "workbook.xlsx") not in last, last


# The two runs the module started as it began (`demos`), read last: whatever ran meanwhile ran beside them.
@pytest.mark.slow
def test_demo_end_to_end(demos: dict[str, tuple[Path, Started]]) -> None:
    out, started = demos["end_to_end"]
    result = started.result()
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output

    table = read_results(out / "results.csv")
    assert len(table.rows) == 28  # 2 models x 4 concurrency x 3 max_tokens, and the base model's long prompt at 4
    assert sorted({r.prompt_level for r in table.rows}) == [32, 1024]
    assert {r.model for r in table.rows} == {"Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"}
    # collected at once, numbered as one collection after another: each model at the short prompt, then
    # the base model at the long one, each in its matrix's order; requests.csv in the same order
    assert [r.exp_id for r in table.rows] == [f"E{n:03d}" for n in range(1, 29)]
    assert [(r.model, r.prompt_level, r.concurrency, r.max_tokens) for r in table.rows] == [
        (served, DEMO_SHORT_PROMPT, c, mt) for served, _ in DEMO_MODELS for c in DEMO_CONCURRENCY
        for mt in DEMO_MAX_TOKENS] + [(DEMO_MODELS[0][0], DEMO_LONG_PROMPT, c, DEMO_MAX_TOKENS[0])
                                      for c in DEMO_CONCURRENCY]
    assert all(r.failed_requests == 0 and r.rate_limited_requests == 0 for r in table.rows)
    with open(out / "requests.csv", newline="", encoding="utf-8") as fh:
        requests = list(csv.DictReader(fh))
    assert {r["exp_id"] for r in requests} == {r.exp_id for r in table.rows}
    assert list(dict.fromkeys(r["exp_id"] for r in requests)) == [r.exp_id for r in table.rows]
    assert sum(int(r["completion_tokens"]) for r in requests if r["warmup"] != "true") == \
        sum(r.total_output_tokens for r in table.rows)

    assert "BaseTPS" in books.outline(out / "workbook.xlsx").defined_names
    text = result.output
    assert "verified:" in text and "match the Python reference" in text
    # Simulator data: no row breaks the roofline or the KV budget. A busy machine can slow a low
    # concurrency level enough that the next one looks superlinear (the check is right to say so):
    # at most two such rows, and no other warning.
    warned = re.search(r"physics warnings: (\d+) of 28 rows", text)
    assert warned is not None, text
    codes = [s.physics.codes() for s in analysis_from_source(out / "results.csv")[0].statuses]
    assert int(warned.group(1)) == sum(1 for c in codes if c) <= 2, codes
    assert {code for c in codes for code in c} <= {"superlinear"}, codes
    # 28 rows: on a quiet machine 8 identify (K_in(1024) at concurrency 1 among them) and 20 check,
    # K_in checked at 2, 4 and 8. A busy machine can measure a level slower than the one below it;
    # that row is then excluded (monotonicity), and a coefficient it identified leaves its rows
    # unidentified: every row counted, at most two excluded, most rows still checked.
    counts = re.search(r"check rows: (\d+)\s+identify: (\d+)\s+unidentified: (\d+)\s+excluded: (\d+)", text)
    assert counts is not None, text
    check, identify, unidentified, excluded = map(int, counts.groups())
    assert check + identify + unidentified + excluded == 28 and excluded <= 2 and check >= 16, counts.groups()
    assert excluded > 0 or (check, identify, unidentified) == (20, 8, 0), counts.groups()
    assert "verdict: insufficient" not in text
    flowing = " ".join(text.split())  # the two lines are wrapped to 80 columns
    assert "Workload: a 528-token prompt at concurrency 3, max_tokens 16 (neither measured)" in flowing
    assert "Leave-one-out error: chain" in flowing
    # the question every surface asks by default: the base max_tokens (16; 50 was not measured)
    length = default_questions(table.rows)["inverse"]["max_tokens"]
    assert length == 16
    assert f"Inverse: 200 TPS at max_tokens {length} needs concurrency 4" in text
    assert "unreachable" not in text  # only when asked


@pytest.mark.slow
def test_demo_in_chinese_with_force_and_the_unreachable_case(demos: dict[str, tuple[Path, Started]]) -> None:
    out, started = demos["chinese"]  # a folder holding the person's keep.txt and an old workbook.xlsx
    result = started.result()
    assert result.exit_code == 0, result.output
    text = result.output
    # the default target is reachable: the headline is a recommendation
    length = default_questions(read_results(out / "results.csv").rows)["inverse"]["max_tokens"]
    assert f"反推：max_tokens {length} 下要达到 250 TPS，需要并发" in text
    assert "无法达到" in text  # the unreachable case, asked for
    # the coefficient, rows and verification sections speak the demo's language too
    assert "已验证：" in text and not any(line.startswith(("coefficient", "exp_id", "verified:", "check rows"))
                                      for line in text.splitlines())
    assert (out / "keep.txt").read_text(encoding="utf-8") == "not the demo's\n"
    assert "第一性原理" in books.outline(out / "workbook.xlsx").sheetnames
    assert sorted(p.name for p in out.parent.iterdir()) == ["demo"]
