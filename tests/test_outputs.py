"""One overwrite policy for every command that writes (scm_xl/outputs.py), through the library and the CLI."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from scm_xl.cli import main
from scm_xl.errors import InputError, UsageError
from scm_xl.outputs import (
    JSON_SUFFIXES, WORKBOOK_SUFFIXES, Output, atomic_write_text, check_outputs, replacing, staging,
)
from support.paths import ARTICLE



def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result: Result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert message in result.stderr, result.stderr


# --- the library ----------------------------------------------------------------------------

def test_existing_output_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "out.xlsx"
    target.write_bytes(b"mine")
    with pytest.raises(UsageError, match=f"{target} already exists: pass --force to replace it"):
        check_outputs([Output("-o", target, WORKBOOK_SUFFIXES)])
    check_outputs([Output("-o", target, WORKBOOK_SUFFIXES)], force=True)


def test_output_equal_to_an_input_through_a_symlink_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "r.csv"
    data.write_text("x", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(data)
    with pytest.raises(UsageError, match="is the input"):
        check_outputs([Output("--json", link)], inputs=[data], force=True)


def test_two_outputs_on_one_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="are the same file"):
        check_outputs([Output("-o", tmp_path / "o.xlsx"), Output("--json", tmp_path / "sub" / ".." / "o.xlsx")])


@pytest.mark.parametrize("name", ["out.txt", "out", "out.xlsx.json"])
def test_wrong_suffix_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError, match="a workbook file name must end in .xlsx"):
        check_outputs([Output("-o", tmp_path / name, WORKBOOK_SUFFIXES, "workbook")])


def test_missing_folder_and_folder_as_output(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="folder does not exist"):
        check_outputs([Output("--json", tmp_path / "nope" / "r.json", JSON_SUFFIXES)])
    (tmp_path / "d.json").mkdir()
    with pytest.raises(UsageError, match="is a folder"):
        check_outputs([Output("--json", tmp_path / "d.json", JSON_SUFFIXES)], force=True)


def test_unwritable_folder(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    unwritable = locked if os.geteuid() != 0 else Path("/proc")  # root writes anywhere but in /proc
    with pytest.raises(InputError, match=f"cannot write in folder {unwritable}"):
        check_outputs([Output("--json", unwritable / "r.json", JSON_SUFFIXES)])


@pytest.mark.parametrize("option", ["-o", "--json"])
def test_the_cli_names_an_unwritable_folder_without_a_traceback(tmp_path: Path, option: str) -> None:
    csv = tmp_path / "r.csv"
    csv.write_bytes(ARTICLE.read_bytes())
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    folder = locked if os.geteuid() != 0 else Path("/proc")
    name = "o.xlsx" if option == "-o" else "r.json"
    args = [option, folder / name] + (["-o", tmp_path / "o.xlsx"] if option == "--json" else [])
    refused(run("fill", csv, *args), f"cannot write in folder {folder}")
    assert not (tmp_path / "o.xlsx").exists()


def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    kept = tmp_path / "kept.json"
    kept.write_text("old", encoding="utf-8")
    kept.chmod(0o604)
    atomic_write_text(kept, "new")
    assert (kept.read_text(encoding="utf-8"), stat.S_IMODE(kept.stat().st_mode)) == ("new", 0o604)


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with replacing(target) as temp:
            temp.write_text("half", encoding="utf-8")
            raise RuntimeError("killed")
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_an_exclusive_write_refuses_a_file_that_appeared_meanwhile(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    with pytest.raises(UsageError, match=f"{target} already exists: pass --force to replace it"):
        with replacing(target, exclusive=True) as temp:
            temp.write_text("mine", encoding="utf-8")
            target.write_text("another run's", encoding="utf-8")  # between the check and the rename
    assert target.read_text(encoding="utf-8") == "another run's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    old = os.umask(0o027)
    try:
        with replacing(tmp_path / "new.json", exclusive=True) as temp:  # nothing there: written, umask mode
            temp.write_text("new", encoding="utf-8")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640


def test_a_staged_file_set_aside_never_replaces_anything(tmp_path: Path) -> None:
    target = tmp_path / "out.xlsx"
    target.write_bytes(b"mine")
    (tmp_path / "out.failed.xlsx").write_bytes(b"an older failure")
    with staging(target, suffix=".xlsx") as staged:
        staged.temp.write_bytes(b"failed")
        aside = staged.set_aside("failed")
    assert aside == tmp_path / "out.failed-2.xlsx" and aside.read_bytes() == b"failed"
    assert target.read_bytes() == b"mine" and (tmp_path / "out.failed.xlsx").read_bytes() == b"an older failure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.failed-2.xlsx", "out.failed.xlsx", "out.xlsx"]


# --- the CLI: refused before any work, nothing written --------------------------------------

def test_verify_json_onto_the_workbook_is_refused(tmp_path: Path) -> None:
    book = tmp_path / "w.xlsx"
    book.write_bytes(b"PK\x03\x04 pretend")
    refused(run("verify", book, "--json", book), f"--json {book} is the input {book}")
    assert book.read_bytes() == b"PK\x03\x04 pretend"


@pytest.mark.parametrize("args, message", [
    (["-o", "{csv}"], "-o {csv} is the input {csv}"),
    (["--json", "{csv}"], "is the input {csv}"),
    (["-o", "{dir}/o.xlsx", "--json", "{dir}/o.xlsx"], "-o {dir}/o.xlsx and --json {dir}/o.xlsx are the same file"),
    (["-o", "{dir}/out.txt"], "-o {dir}/out.txt: a workbook file name must end in .xlsx"),
    (["-o", "{dir}/out"], "-o {dir}/out: a workbook file name must end in .xlsx"),
    (["-o", "{dir}/missing/o.xlsx"], "folder does not exist"),
    (["-o", "{dir}/o.xlsx", "--json", "{dir}/missing/r.json"], "folder does not exist"),
    (["-o", "{dir}/o.xlsx", "--json", "{dir}/report"], "--json {dir}/report: a JSON report file name must end in .json"),
])
def test_fill_refuses_bad_outputs_before_any_work(tmp_path: Path, args: list[str], message: str) -> None:
    csv = tmp_path / "r.csv"
    csv.write_bytes(ARTICLE.read_bytes())
    values = {"csv": csv, "dir": tmp_path}
    refused(run("fill", csv, *[a.format(**values) for a in args]), message.format(**values))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]
    assert csv.read_bytes() == ARTICLE.read_bytes()


def test_build_template_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "t.xlsx"
    out.write_bytes(b"mine")
    refused(run("build", "template", "-o", out), f"{out} already exists: pass --force to replace it")
    assert out.read_bytes() == b"mine"
    result = run("build", "template", "-o", out, "--force", "--rows", "20")
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:2] == b"PK"


@pytest.mark.slow
def test_fill_writes_through_links_and_the_json_follows_the_umask(tmp_path: Path) -> None:
    real = tmp_path / "real.xlsx"
    real.write_bytes(b"old")
    link = tmp_path / "link.xlsx"
    link.symlink_to(real)
    report = tmp_path / "r.json"
    old = os.umask(0o002)
    try:
        result = run("fill", ARTICLE, "-o", link, "--json", report, "--force", "--engine", "ironcalc")
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and real.read_bytes()[:2] == b"PK"
    assert stat.S_IMODE(report.stat().st_mode) == 0o664  # the user's umask, not 600
    json.loads(report.read_text(encoding="utf-8"))
    # A second fill onto the same output without --force is refused and changes nothing.
    before = real.read_bytes()
    refused(run("fill", ARTICLE, "-o", link), f"{link} already exists: pass --force to replace it")
    assert real.read_bytes() == before
    # --workbook through a link, updated in place: the link stays a link.
    result = run("fill", ARTICLE, "--workbook", link, "--force", "--engine", "ironcalc")
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and link.resolve() == real.resolve()


def test_o_naming_the_workbook_is_an_in_place_update(tmp_path: Path) -> None:
    book = tmp_path / "w.xlsx"
    book.write_bytes(b"PK\x03\x04 pretend")
    for extra in ([], ["-o", str(book)]):
        refused(run("fill", ARTICLE, "--workbook", book, *extra),
                f"--workbook {book} would be updated in place: pass --force to replace it")
    assert book.read_bytes() == b"PK\x03\x04 pretend"


def test_fill_needs_a_csv_or_a_workbook(tmp_path: Path) -> None:
    refused(run("fill"), "give a results CSV (or several), or --workbook X")


def test_an_exit_asked_for_while_the_staged_file_is_made_waits_until_it_is_covered(tmp_path, monkeypatch):
    """The CLI's SIGTERM handler hands its exit to `raise_or_hold`: arriving right after the
    temporary file exists (before the `finally` that removes it), it is raised once the file is
    covered, so nothing is left behind."""
    import tempfile

    from scm_xl import outputs

    real = tempfile.mkstemp

    def made_then_signalled(*args, **kwargs):
        made = real(*args, **kwargs)
        outputs.raise_or_hold(KeyboardInterrupt())  # what the handler does at that moment
        return made

    monkeypatch.setattr(outputs.tempfile, "mkstemp", made_then_signalled)
    with pytest.raises(KeyboardInterrupt):
        with outputs.staging(tmp_path / "out.xlsx", suffix=".xlsx"):
            pytest.fail("the exit must come before the body")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyboardInterrupt):  # outside staging it is raised at once
        outputs.raise_or_hold(KeyboardInterrupt())


def test_an_exit_asked_for_during_the_write_probe_leaves_no_probe(tmp_path, monkeypatch):
    import tempfile

    from scm_xl import outputs

    real = tempfile.mkstemp

    def made_then_signalled(*args, **kwargs):
        made = real(*args, **kwargs)
        outputs.raise_or_hold(KeyboardInterrupt())
        return made

    monkeypatch.setattr(outputs.tempfile, "mkstemp", made_then_signalled)
    with pytest.raises(KeyboardInterrupt):
        outputs.check_writable(tmp_path / "out.xlsx")
    assert list(tmp_path.iterdir()) == []
    assert outputs._holding == 0  # nothing is left held for the next signal
