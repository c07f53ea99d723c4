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
- Without `--force` the output is created exclusively when it is put in place: a file
  that appeared there while the command worked (another run writing the same output)
  is refused then too, not silently replaced.
- A workbook that fails verification replaces nothing: it is set aside beside the output
  as NAME.failed.xlsx (never over an existing file), for the person to inspect.

`check_outputs` applies the checks before any work starts; `atomic_write_text`,
`atomic_write_bytes`, `replacing` and `staging` do the writing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Sequence

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
    with signals_held():  # a signal's exit waits until the probe is gone again
        try:  # a real probe: access() says yes to root on a read-only file system
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".scm-xl-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise InputError(f"cannot write in folder {folder}: {exc.strerror}", path=shown) from None
    if target.exists() and not force:
        raise UsageError(already_exists(shown))


def already_exists(shown: str | Path) -> str:
    """The refusal of an existing output (one wording, before the work and at the rename)."""
    return f"{shown} already exists: pass --force to replace it"


def scratch_file(folder: str | Path, prefix: str) -> IO[bytes]:
    """A file without a name in `folder`, beside the output (/tmp may be memory, which a large
    scratch file would then take), or where temporary files go when that folder is not writable
    (`verify` of a workbook in a read-only folder). It is gone once closed, or with the command."""
    try:
        return tempfile.TemporaryFile(dir=folder, prefix=f".{prefix}")
    except OSError:
        return tempfile.TemporaryFile(prefix=prefix)


def new_file_mode() -> int:
    """The mode a new file gets under the user's umask (0o666 & ~umask)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


class Staged:
    """A complete file in a temporary beside its target, waiting to be put in place or set aside.

    The work happens under a temporary name, so that nothing at the target changes until the
    file is known to be good; `staging` removes the temporary whatever happens."""

    def __init__(self, shown: str, target: Path, temp: Path, mode: int) -> None:
        self.shown = shown  # the path as the user gave it (for messages)
        self.target = target  # where it lands (symlinks followed)
        self.temp = temp
        self.mode = mode  # a replaced file's mode, or the umask's for a new one

    def _flush(self, mode: int) -> None:
        with open(self.temp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(self.temp, mode)

    def put_in_place(self, *, exclusive: bool = False) -> Path:
        """Rename the file onto the target. `exclusive`: the target must not exist (the caller
        checked that at the start; another run may have written it since): UsageError, exit 2."""
        try:
            self._flush(self.mode)
            if exclusive:
                if not _link_new(self.temp, self.target):
                    raise UsageError(already_exists(self.shown) + " (it appeared while this run worked: "
                                     "another run wrote it?)")
            else:
                os.replace(self.temp, self.target)
        except OSError as exc:
            raise InputError(f"cannot write file: {exc.strerror}", path=self.shown) from exc
        return self.target

    def set_aside(self, label: str = "failed") -> Path:
        """Keep the file beside the target as NAME.<label>.EXT (NAME.<label>-2.EXT, ... when taken:
        never over an existing file); the target is left as it was. Returns the path."""
        try:
            self._flush(new_file_mode())
            for number in range(1, 1000):
                tag = label if number == 1 else f"{label}-{number}"
                aside = aside_path(self.target, tag)
                if _link_new(self.temp, aside):
                    return aside
        except OSError as exc:
            raise InputError(f"cannot write file: {exc.strerror}", path=self.shown) from exc
        raise InputError(f"cannot set the file aside: {aside_path(self.target, label)} and 998 more are taken",
                         path=self.shown)


def aside_path(target: Path, tag: str) -> Path:
    """out.xlsx -> out.<tag>.xlsx: the name says what it is and keeps the extension programs go by."""
    return target.with_name(f"{target.stem}.{tag}{target.suffix}")


# Errors of a file system that has no hard links (FAT, some network and FUSE file systems).
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}


def _link_new(temp: Path, target: Path) -> bool:
    """Move `temp` to `target` only if no file is there (False when one is): a hard link fails
    atomically on an existing name, where a check followed by a rename would race."""
    try:
        os.link(temp, target)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        try:  # claim the name exclusively, then rename over the claim
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            return False
        os.replace(temp, target)
        return True
    temp.unlink()
    return True


# While `staging` makes its temporary file and before it is under the `finally` that removes it,
# a signal handler that ends the run (the CLI's SIGTERM handler) must not raise: it hands its
# exception to `raise_or_hold`, which keeps it until the file is covered (a handler may run in
# the main thread whatever the thread masks, so masking alone does not close the window).
_holding = 0
_held: list[BaseException] = []


def raise_or_hold(exc: BaseException) -> None:
    """Raise `exc` now, or, inside `staging`'s critical moment, as soon as it ends."""
    if _holding:
        _held.append(exc)
        return
    raise exc


def _hold() -> None:
    global _holding
    _holding += 1


def _release() -> None:
    global _holding
    _holding -= 1
    if not _holding and _held:
        raise _held.pop(0)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """A signal's exit (`raise_or_hold`) that lands in the block is raised when the block ends:
    for a step whose state an exit half-way would leave broken (`check_writable`'s probe file,
    `xlsx.package.copy_package` opening a member's writer and entering its `with`)."""
    _hold()
    try:
        yield
    finally:
        _release()


@contextlib.contextmanager
def staging(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Staged]:
    """Yield a `Staged` temporary file beside `path`; the caller writes it, then calls
    `put_in_place()` or `set_aside()`. Neither called (an error, a signal): the temporary file
    is removed and `path` is untouched. `suffix` names the temporary file for programs that go
    by the extension (a recalculation engine wants .xlsx)."""
    shown = str(path)
    target = write_target(path)
    _hold()  # a signal's exit waits until the temporary file is under the `finally` below
    try:
        mode = target.stat().st_mode & 0o7777 if target.exists() else new_file_mode()
        fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
        os.close(fd)
    except OSError as exc:
        _release()  # a held exit wins over this error: there is nothing to remove yet
        raise InputError(f"cannot write file: {exc.strerror}", path=shown) from exc
    except BaseException:
        _release()
        raise
    staged = Staged(shown, target, Path(temp_name), mode)
    try:
        _release()  # a held signal's exit is raised here, inside the try
        yield staged
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=shown) from exc
    finally:
        staged.temp.unlink(missing_ok=True)


@contextlib.contextmanager
def replacing(path: str | Path, *, suffix: str = ".tmp", exclusive: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block ends without error, move it onto `path`.

    The caller writes the whole file to the yielded path (any library's `save(path)` will
    do). On an error the temporary file is removed and `path` is untouched. `exclusive`: refuse
    (UsageError) if `path` exists by then, without `--force` (see `Staged.put_in_place`).
    """
    with staging(path, suffix=suffix) as staged:
        yield staged.temp
        staged.put_in_place(exclusive=exclusive)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace `path` with `data` in one step (temporary file, fsync, rename)."""
    with replacing(path) as temp:
        temp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> None:
    """Replace `path` with `text` in one step; newlines are written as given."""
    atomic_write_bytes(path, text.encode(encoding))
