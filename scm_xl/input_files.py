"""Opening an input file safely: a regular file only, and never more than a cap read.

A path given on the command line can name something that never ends (`/dev/zero`,
`/dev/urandom`), never starts (a FIFO nobody writes to: even opening it blocks) or is no
file at all (a folder). Reading such a thing whole runs until memory is gone, so every
reader of user files checks the path with `refuse_non_regular` before it opens it, and
reads through `read_capped`, which stops one byte past its cap (a regular file can still
grow while it is read, or, like those under /proc, report a size of 0).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from scm_xl.errors import InputError

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def refuse_non_regular(path: str | Path) -> None:
    """InputError unless `path` is a regular file (after following symlinks); stats, never opens.

    A path that does not exist passes: opening it names that problem.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=str(path)) from None
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise InputError(f"not a regular file ({kind}): give the path of a file saved on disk", path=str(path))


def read_capped(path: str | Path, cap: int, what: str) -> bytes:
    """The bytes of the regular file `path`; InputError when it holds more than `cap` bytes.

    `what` names the kind of file in the message ("a results CSV").
    """
    where = str(path)
    refuse_non_regular(where)
    try:
        with open(where, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > cap:
                raise InputError(_too_big(what, cap), path=where)
            data = handle.read(cap + 1)
    except FileNotFoundError:
        raise InputError("file not found", path=where) from None
    except IsADirectoryError:
        raise InputError("not a regular file (a folder): give the path of a file saved on disk", path=where) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=where) from None
    if len(data) > cap:
        raise InputError(_too_big(what, cap), path=where)
    return data


def _too_big(what: str, cap: int) -> str:
    return f"refused: larger than {cap // (1024 * 1024):,} MiB, the most scm-xl reads of {what}"
