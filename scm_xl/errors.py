"""Exceptions raised by scm-xl.

    ScmXlError                 base; the CLI prints "Error: <message>" and exits with `exit_code`
    ├── InputError             bad input file or value (exit 2); names file, line and column
    ├── UsageError             bad option combination (exit 2)
    ├── EngineError            a recalculation engine is missing or failed (exit 2)
    └── CheckFailed            a check did not pass (exit 1): workbook vs reference mismatch, or the
                               data cannot identify the answer asked for; an empty message means
                               the command already printed why

`scm_xl.cli._common.handle_errors` is the one place that turns these into exit codes. An InputError
raised with `InputError.worded` takes its sentence from scm_xl.error_texts, so the CLI can print it
in the command's language (`InputError.text`); its `problem` and str() are English.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scm_xl.error_texts import problem_text

if TYPE_CHECKING:
    from scm_xl.rules import Lang


class ScmXlError(Exception):
    """scm-xl failed"""

    exit_code = 2


class InputError(ScmXlError):
    """Bad input: `problem` (English) at `path`, `line`, `column`, each when known.

    One raised with `worded` carries its sentence's key and values as well, so the CLI can say it
    in the language of the command (`text(lang)`); `problem` and str() stay English.
    """

    exit_code = 2

    def __init__(self, problem: str, *, path: str | None = None, line: int | None = None,
                 column: str | None = None) -> None:
        self.problem = problem
        self.path = path
        self.line = line
        self.column = column
        self.key: str | None = None
        self.values: dict[str, Any] = {}
        super().__init__(self._format())

    @classmethod
    def worded(cls, key: str, *, path: str | None = None, line: int | None = None, column: str | None = None,
               **values: Any) -> InputError:
        """The InputError whose problem is the sentence `key` of scm_xl.error_texts.WORDS, `values`
        spliced in (each a plain value, or an error_texts.Phrase or Joined)."""
        error = cls(problem_text("en", key, values), path=path, line=line, column=column)
        error.key, error.values = key, dict(values)
        return error

    def located(self, *, path: str | None = None, line: int | None = None,
                column: str | None = None) -> InputError:
        """The same problem (its sentence key kept) at another place."""
        error = InputError(self.problem, path=path, line=line, column=column)
        error.key, error.values = self.key, self.values
        return error

    def text(self, lang: Lang) -> str:
        """The message in `lang`: the same place (path:line: column: ), its problem in `lang` when
        it was raised `worded` (else English)."""
        if self.key is None or lang == "en":
            return str(self)
        return self._format(problem_text(lang, self.key, self.values))

    def _format(self, problem: str | None = None) -> str:
        where = ""
        if self.path is not None:
            where = str(self.path)
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        if self.column is not None:
            where += f"{self.column}: "
        return where + (self.problem if problem is None else problem)


class UsageError(ScmXlError):
    """Bad usage"""

    exit_code = 2


class EngineError(ScmXlError):
    """Recalculation engine failed"""

    exit_code = 2


class CheckFailed(ScmXlError):
    """A check failed"""

    exit_code = 1
