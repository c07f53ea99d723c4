"""Where scm-xl writes: one overwrite policy and one atomic write for every command.

The policy (the README's "Files scm-xl writes" states it once):

- An output that already exists is refused (exit 2, nothing done) unless `--force`;
  with `--force` it is replaced. No backups are made: the file being replaced is the
  user's to keep.
- An output may not be one of the command's inputs or another of its outputs
  (compared after resolving symlinks): `verify w.xlsx --json w.xlsx` is refused.
- Its folder must exist and be writable, it must not be a folder, and its name must
  end in what is written there (`.xlsx` for a workbook, `.json` for a report, ...).
- A symlink is written through: the link stays and its target gets the new content.
- Content goes to a unique temporary file beside the target, is flushed to disk, and
  is renamed onto the target only when complete, so a crash or a concurrent run never
  leaves a half-written file. New files get the user's umask; a replaced file keeps
  its mode.

`check_outputs` applies the checks before any work starts; `atomic_write_text`,
`atomic_write_bytes` and `replacing` do the writing.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from scm_xl.errors import InputError, UsageError

WORKBOOK_SUFFIXES = (".xlsx",)
JSON_SUFFIXES = (".json",)
CSV_SUFFIXES = (".csv",)
HTML_SUFFIXES = (".html", ".htm")
TOML_SUFFIXES = (".toml",)


@dataclass(frozen=True)
class Output:
    """One file a command will write: the option that named it, the path, the suffixes it may have."""

    option: str  # "-o", "--json", ... (for messages)
    path: str | Path | None  # None: not asked for
    suffixes: tuple[str, ...] = ()  # empty: any name
    what: str = "file"  # "workbook", "JSON report", ...


def write_target(path: str | Path) -> Path:
    """The file a write to `path` lands in: symlinks are followed, so the link survives."""
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def check_outputs(outputs: Sequence[Output], *, inputs: Sequence[str | Path | None] = (),
                  force: bool = False) -> None:
    """Refuse, before any work, outputs that break the policy (UsageError / InputError, exit 2)."""
    real_inputs = {write_target(p): str(p) for p in inputs if p is not None}
    claimed: dict[Path, Output] = {}
    for out in outputs:
        if out.path is None:
            continue
        shown = str(out.path)
        target = write_target(out.path)
        if target in real_inputs:
            raise UsageError(f"{out.option} {shown} is the input {real_inputs[target]}: writing there would "
                             "destroy it; choose another path")
        if target in claimed:
            other = claimed[target]
            raise UsageError(f"{other.option} {other.path} and {out.option} {shown} are the same file; "
                             "give each output its own path")
        claimed[target] = out
        if out.suffixes and target.suffix.lower() not in out.suffixes and Path(shown).suffix.lower() \
                not in out.suffixes:
            raise UsageError(f"{out.option} {shown}: a {out.what} file name must end in "
                             f"{' or '.join(out.suffixes)}")
        check_writable(shown, force=force)


def check_writable(path: str | Path, *, force: bool = False) -> None:
    """The folder exists and takes files; an existing file is replaced only with `force`."""
    shown = str(path)
    target = write_target(path)
    if target.is_dir():
        raise UsageError(f"{shown} is a folder; give a file name")
    folder = target.parent
    if not folder.is_dir():
        raise InputError(f"folder does not exist: {folder}", path=shown)
    try:  # a real probe: access() says yes to root on a read-only file system
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".scm-xl-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"cannot write in folder {folder}: {exc.strerror}", path=shown) from None
    if target.exists() and not force:
        raise UsageError(f"{shown} already exists: pass --force to replace it")


def new_file_mode() -> int:
    """The mode a new file gets under the user's umask (0o666 & ~umask)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def replacing(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block ends without error, move it onto `path`.

    The caller writes the whole file to the yielded path (any library's `save(path)` will
    do). On an error the temporary file is removed and `path` is untouched. `suffix` names the
    temporary file for programs that go by the extension (a recalculation engine wants .xlsx).
    """
    shown = str(path)
    target = write_target(path)
    try:
        mode = target.stat().st_mode & 0o7777 if target.exists() else new_file_mode()
        fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
        os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=shown) from exc
    temp = Path(temp_name)
    try:
        yield temp
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=shown) from exc
    finally:
        temp.unlink(missing_ok=True)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace `path` with `data` in one step (temporary file, fsync, rename)."""
    with replacing(path) as temp:
        temp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> None:
    """Replace `path` with `text` in one step; newlines are written as given."""
    atomic_write_bytes(path, text.encode(encoding))
