"""Exceptions raised by scm-xl.

    ScmXlError                 base; the CLI prints "Error: <message>" and exits with `exit_code`
    ├── InputError             bad input file or value (exit 2); names file, line and column
    ├── UsageError             bad option combination (exit 2)
    ├── EngineError            a recalculation engine is missing or failed (exit 2)
    └── CheckFailed            a check did not pass (exit 1): workbook vs reference mismatch, or the
                               data cannot identify the answer asked for; an empty message means
                               the command already printed why

`scm_xl.cli._common.handle_errors` is the one place that turns these into exit codes.
"""

from __future__ import annotations


class ScmXlError(Exception):
    """scm-xl failed"""

    exit_code = 2


class InputError(ScmXlError):
    """Bad input"""

    exit_code = 2

    def __init__(self, problem: str, *, path: str | None = None, line: int | None = None,
                 column: str | None = None) -> None:
        self.problem = problem
        self.path = path
        self.line = line
        self.column = column
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.path is not None:
            where = str(self.path)
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        if self.column is not None:
            where += f"{self.column}: "
        return where + self.problem


class UsageError(ScmXlError):
    """Bad usage"""

    exit_code = 2


class EngineError(ScmXlError):
    """Recalculation engine failed"""

    exit_code = 2


class CheckFailed(ScmXlError):
    """A check failed"""

    exit_code = 1
