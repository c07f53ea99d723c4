"""fill when things go wrong around it: a workbook that fails verification, a person's comments
and sheet order in `--workbook`, sizes on the meta sheet beyond what a workbook holds, SIGTERM
in the middle of a fill, and two fills racing to one new output."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner, Result
from openpyxl.comments import Comment

from scm_xl.cli import main
from scm_xl.results import read_results
from scm_xl.workbook.raw_sheet import OWN_COMMENTS
from scm_xl.workbook import fill as filling
from scm_xl.workbook.io import MAX_LAYOUT_ROWS
from scm_xl.workbook.registry import read_layout
from support import books
from support.paths import ARTICLE
from support.reports import one_wrong_cell

ROOT = Path(__file__).resolve().parent.parent
SCM_XL = str(Path(sys.executable).with_name("scm-xl"))
HEADER = ("exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens,"
          "total_time_s,total_output_tokens")


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def leftovers(folder: Path) -> list[str]:
    """Temporary files scm-xl writes beside an output (.NAME.XXXX.xlsx, .fills, .values)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# --- a workbook that fails verification replaces nothing --------------------------------------

@pytest.fixture
def disagreeing(monkeypatch: pytest.MonkeyPatch) -> None:
    one_wrong_cell(monkeypatch)


@pytest.mark.usefixtures("disagreeing")
def test_a_workbook_that_fails_verification_leaves_the_users_file(tmp_path: Path) -> None:
    out = tmp_path / "out.xlsx"
    out.write_bytes(b"the user's own file")
    report = tmp_path / "report.json"
    result = run("fill", ARTICLE, "-o", out, "--force", "--lang", "en", "--json", report)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert out.read_bytes() == b"the user's own file"
    failed = tmp_path / "out.failed.xlsx"
    assert result.stderr.splitlines()[-1] == (f"Error: the workbook failed verification: {out} was left as it was; "
                                              f"the workbook that failed is {failed}")
    assert f"wrote {out}" not in result.stdout
    assert "MISMATCH: 1 of" in result.stdout and report.is_file()  # the report says what disagreed
    assert books.layout(failed).lang == "en"  # the whole workbook (every sheet there), to inspect
    assert leftovers(tmp_path) == []

    # Again: the first failed workbook is not replaced either.
    again = run("fill", ARTICLE, "-o", out, "--force", "--lang", "en")
    assert again.exit_code == 1, again.output
    assert f"the workbook that failed is {tmp_path / 'out.failed-2.xlsx'}" in again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.failed-2.xlsx", "out.failed.xlsx", "out.xlsx",
                                                          "report.json"]


@pytest.mark.usefixtures("disagreeing")
def test_a_new_output_that_fails_verification_is_not_written(tmp_path: Path) -> None:
    out = tmp_path / "new.xlsx"
    result = run("fill", ARTICLE, "-o", out)
    assert result.exit_code == 1, result.output
    assert f"{out} was not written; the workbook that failed is {tmp_path / 'new.failed.xlsx'}" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.failed.xlsx"]


# --- a person's comments and sheet order survive fill --workbook -----------------------------

def test_fill_workbook_keeps_comments_and_the_persons_sheet_order(tmp_path: Path) -> None:
    mine = tmp_path / "mine.xlsx"
    assert run("fill", ARTICLE, "-o", mine, "--lang", "en").exit_code == 0
    wb = openpyxl.load_workbook(mine)
    lo = read_layout(wb, mine)
    raw = wb[lo.title("raw")]
    ours = list(wb.sheetnames)

    def cell_of(exp_id: str, key: str) -> str:
        column = lo.entry_col("exp_id")
        row = next(r for r in range(lo.raw_first, lo.raw_last + 1) if raw[f"{column}{r}"].value == exp_id)
        return f"{lo.entry_col(key)}{row}"

    raw[cell_of("E05", "exp_id")].comment = Comment("rerun after the driver update", "me")
    raw[cell_of("E02", "total_time_s")].comment = Comment("server was warm", "me")
    raw[cell_of("E07", "model")].comment = Comment("a different quantisation", "me")
    raw["A1"].comment = Comment("ids from the lab book", "me")
    first = wb.create_sheet("Notes", 0)
    first["A1"] = "read me first"
    wb.save(mine)

    # The new results: the article's rows reversed, E02 re-measured, E07 gone.
    rows = [r for r in reversed(read_results(ARTICLE).rows) if r.exp_id != "E07"]
    new = tmp_path / "new.csv"
    new.write_text("\n".join([HEADER] + [
        f"{r.exp_id},{r.model},{r.concurrency},{r.requests_per_slot},{r.total_requests},{r.max_tokens},"
        f"{0.43 if r.exp_id == 'E02' else r.total_time_s},{r.total_output_tokens}" for r in rows]) + "\n",
        encoding="utf-8")
    result = run("fill", new, "--workbook", mine, "--force")
    assert result.exit_code == 0, result.output

    raw = books.worksheet(mine, lo.title("raw"))
    assert raw.parent.sheetnames == ["Notes", *ours]  # theirs first, as they put it; ours in our order
    assert raw[cell_of("E05", "exp_id")].comment.text == "rerun after the driver update"  # moved with its row
    assert raw[cell_of("E02", "total_time_s")].comment.text == "server was warm"
    assert raw["A1"].comment.text == "ids from the lab book"
    texts = [cell.comment.text for row in raw.iter_rows() for cell in row if cell.comment is not None]
    ours = [text for text in texts if text in OWN_COMMENTS]  # the inserted-row hint, written once by the rebuild
    assert len(ours) == 1
    assert sorted(set(texts) - OWN_COMMENTS) == ["ids from the lab book", "rerun after the driver update",
                                                 "server was warm"]
    assert len(texts) == 4
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert any(f"'{lo.title('raw')}'!{lo.entry_col('model')}" in n and "E07 is not in the new data" in n
               and "a different quantisation" in n for n in notes), notes
    assert any("scm-xl rewrote that cell: 0.42 is now 0.43" in n for n in notes), notes
    assert not any("E05" in n for n in notes), notes  # an unchanged cell that moved: nothing to say


# --- meta-sheet sizes beyond what a filled workbook holds --------------------------------------

def _limited(cap: int = 3 << 30) -> None:
    """A child that would allocate gigabytes fails fast instead of taking the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("meta") / "template.xlsx"
    assert run("build", "template", "-o", path, "--lang", "en", "--rows", "200").exit_code == 0
    return path


def tampered(template: Path, folder: Path, sizes: dict[str, int]) -> tuple[Path, dict[str, int]]:
    """The template with `sizes` typed on its meta sheet; where each key sits (its row)."""
    meta = books.sheet(template, "_scm_meta", formulas=True)
    rows = {meta.cell(r, 1).value: r for r in range(1, meta.max_row + 1)}
    path = folder / "tampered.xlsx"
    books.retyped(template, path, "_scm_meta", {f"B{rows[key]}": value for key, value in sizes.items()})
    return path, rows


SIZES = {
    # (sizes typed, the key whose cell the message names, what it says)
    "a million rows": ({"rows": 1_000_000}, "rows", f"not a whole number from 1 to {MAX_LAYOUT_ROWS:,}"),
    "every slot at the old limits": ({"c_slots": 10_000, "l_slots": 10_000, "m_slots": 10_000, "cell_slots": 100_000,
                                      "p_slots": 10_000}, "c_slots", "not a whole number from 1 to 1,000"),
    "slots each allowed, together too many": ({"c_slots": 600, "l_slots": 600}, "c_slots",
                                              "1,215 least-squares parameters (1 + c_slots 600 + l_slots 600 + "
                                              "m_slots 6 + p_slots 8): a workbook holds at most 1,000"),
    "more cells than rows": ({"cell_slots": 50_000}, "cell_slots", "200 raw rows have at most 216 cell slots"),
    "columns past XFD": ({"c_slots": 1_000, "l_slots": 1_000}, "c_slots", "a workbook holds at most 1,000"),
}


@pytest.mark.parametrize("case", SIZES)
def test_meta_sizes_beyond_a_workbook_are_refused_before_any_work(case: str, template: Path, tmp_path: Path) -> None:
    sizes, key, says = SIZES[case]
    path, rows = tampered(template, tmp_path, sizes)
    commands = [["verify", str(path)]]
    if case in ("every slot at the old limits", "columns past XFD"):  # fill --workbook died on these too
        commands.append(["fill", str(ARTICLE), "--workbook", str(path), "-o", str(tmp_path / "out.xlsx")])
    for command in commands:
        started = time.monotonic()
        done = subprocess.run([SCM_XL, *command, "-q"], capture_output=True, text=True, timeout=120,
                              preexec_fn=_limited)
        assert done.returncode == 2, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith(f"Error: {path}: the _scm_meta sheet's "), done.stderr
        assert f"('_scm_meta'!B{rows[key]})" in done.stderr and says in done.stderr, done.stderr
        assert time.monotonic() - started < 30  # refused at once, nothing built at those sizes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tampered.xlsx"]


def test_data_beyond_what_a_workbook_holds_is_refused_by_fill(tmp_path: Path) -> None:
    """The same bound for a results CSV: 1,200 concurrency levels need 1,200+ parameters."""
    csv = tmp_path / "levels.csv"
    csv.write_text("\n".join([HEADER] + [f"E{c},m,{c},1,{c},50,{1 + c / 100:.2f},{50 * c}" for c in range(1, 1201)])
                   + "\n", encoding="utf-8")
    result = run("fill", csv, "-o", tmp_path / "out.xlsx", "-q")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: {csv}: the data need a workbook with 1,227 least-squares parameters "
                                    "(1 + c_slots 1,200 + "), result.stderr
    assert "a workbook holds at most 1,000" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["levels.csv"]


# --- SIGTERM in the middle of a fill ----------------------------------------------------------

def test_sigterm_during_a_fill_leaves_no_temporary_file(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from data.gen import experiment, write_csv

    rows = [experiment(f"E{i:04d}", model, c, length, 40.0 * c / (1 + 0.1 * c) * (50 / length) ** 0.5)
            for i, (model, c, length) in enumerate(
                (m, c, length) for _ in range(40) for m in ("model-a", "model-b") for c in (1, 2, 4, 8)
                for length in (50, 100))]
    csv = write_csv(tmp_path / "big.csv", rows)  # 640 rows: a few seconds of work
    folder, temp = tmp_path / "out", tmp_path / "tmp"
    folder.mkdir()
    temp.mkdir()
    child = subprocess.Popen([SCM_XL, "fill", str(csv), "-o", str(folder / "out.xlsx")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(temp)})
    try:
        deadline, seen = time.monotonic() + 60, []
        while not seen and child.poll() is None and time.monotonic() < deadline:
            seen = leftovers(folder)  # the write probe, then the workbook being made: either will do
            time.sleep(0.002)
        if not seen:
            child.kill()
            out, err = child.communicate(timeout=60)
            pytest.fail(f"the fill never wrote its temporary workbook (exit {child.returncode}):\n{err[-3000:]}")
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:  # never leave the child running into the next test
            child.kill()
            child.communicate()
    assert child.returncode == 128 + signal.SIGTERM, err
    assert err.rstrip().endswith("Terminated.") and "Traceback" not in err
    assert (list(folder.iterdir()), list(temp.iterdir())) == ([], [])


# --- two fills to one new output ----------------------------------------------------------------

def test_an_output_written_by_another_run_meanwhile_is_not_replaced(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.xlsx"
    check = filling._check

    def other_run_finishes_first(*args: object, **kwargs: object) -> object:
        out.write_bytes(b"the other run's workbook")  # after the check at the start, before the rename
        return check(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(filling, "_check", other_run_finishes_first)
    result = run("fill", ARTICLE, "-o", out)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[-1].startswith(f"Error: {out} already exists: pass --force to replace it")
    assert out.read_bytes() == b"the other run's workbook"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.xlsx"]
    # --force says replacing is fine
    assert run("fill", ARTICLE, "-o", out, "--force").exit_code == 0
    assert out.read_bytes()[:2] == b"PK"


@pytest.mark.parametrize("command", ["fill", "verify"])
def test_the_engine_help_says_what_auto_does(command: str) -> None:
    """auto takes IronCalc at every size (scm_xl.engines.choose_engine), not LibreOffice above 500 rows."""
    from click.testing import CliRunner

    from scm_xl.cli import main

    text = " ".join(CliRunner().invoke(main, [command, "--help"], terminal_width=200).output.split())
    assert "auto: IronCalc (embedded, at every size)" in text and "above 500" not in text
