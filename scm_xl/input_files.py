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

from scm_xl.error_texts import Phrase
from scm_xl.errors import InputError

_KINDS = (  # a test of the file's mode, and the words (scm_xl.error_texts) of what it is
    (stat.S_ISDIR, "kind_folder"),
    (stat.S_ISFIFO, "kind_fifo"),
    (stat.S_ISCHR, "kind_char"),
    (stat.S_ISBLK, "kind_block"),
    (stat.S_ISSOCK, "kind_socket"),
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
        raise InputError.worded("cannot_read", path=str(path), reason=exc.strerror) from None
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "kind_other")
    raise InputError.worded("not_regular", path=str(path), kind=Phrase(kind))


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
        raise InputError.worded("file_not_found", path=where) from None
    except IsADirectoryError:
        raise InputError.worded("not_regular", path=where, kind=Phrase("kind_folder")) from None
    except OSError as exc:
        raise InputError.worded("cannot_read", path=where, reason=exc.strerror) from None
    if len(data) > cap:
        raise InputError(_too_big(what, cap), path=where)
    return data


def _too_big(what: str, cap: int) -> str:
    return f"refused: larger than {size_text(cap)}, the most scm-xl reads of {what}"


def size_text(size: int) -> str:
    """A cap in words: "64 MiB", "64 KiB", or bytes when it is neither a whole MiB nor KiB."""
    for unit, name in ((1024 * 1024, "MiB"), (1024, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit:,} {name}"
    return f"{size:,} bytes"
