"""What a maintainer expects of the package around the code: `python -m scm_xl`, one
version, a licence, the typing marker, and a .gitignore that hides what the CLI writes
by default without hiding the committed templates."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

import scm_xl

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_python_m_scm_xl_help() -> None:
    done = _run(sys.executable, "-m", "scm_xl", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: scm-xl ")
    for command in ("collect", "fill", "verify", "predict", "solve"):
        assert f"\n  {command} " in done.stdout


def test_python_m_scm_xl_bad_option_exits_2() -> None:
    done = _run(sys.executable, "-m", "scm_xl", "--no-such-option")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_one_version() -> None:
    assert importlib.metadata.version("scm-xl") == scm_xl.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]


@pytest.mark.parametrize("how", ["script", "module"])
def test_version_option_prints_the_version(how: str) -> None:
    if how == "script":
        script = Path(sysconfig.get_path("scripts")) / "scm-xl"
        assert script.exists(), f"{script}: the console script is not installed"
        argv: tuple[str, ...] = (str(script), "--version")
    else:
        argv = (sys.executable, "-m", "scm_xl", "--version")
    done = _run(*argv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"scm-xl, version {scm_xl.__version__}"


def test_licence_and_typing_marker_ship() -> None:
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert (Path(scm_xl.__file__).parent / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["scm_xl"]
    assert "py.typed" in package_data


def test_no_wheel_or_archive_committed_at_the_root() -> None:
    assert not [p.name for p in ROOT.glob("*.whl")]


GIT = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")


@GIT
@pytest.mark.parametrize("path", ["results.csv", "requests.csv", "results.xlsx", "matrix.toml"])
def test_gitignore_hides_what_the_cli_writes_by_default(path: str) -> None:
    done = _run("git", "check-ignore", "--no-index", "-q", path)
    assert done.returncode == 0, f"{path} is not ignored {done.stderr}"


@GIT
def test_gitignore_hides_no_committed_file() -> None:
    done = _run("git", "ls-files", "--cached", "--ignored", "--exclude-standard")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert _run("git", "check-ignore", "--no-index", "-q", "templates/new.xlsx").returncode == 1


def test_ci_runs_the_type_checker_before_the_tests() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert ".venv/bin/mypy" in lines, "the type check is a line of its own, under set -e"
    assert lines.index(".venv/bin/mypy") < next(i for i, line in enumerate(lines) if ".venv/bin/pytest" in line)
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert mypy["files"] == ["scm_xl"]
