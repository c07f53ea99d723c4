"""Sentences that can be said in English or Chinese from one template: the one mechanism behind
every table of words (scm_xl.report_texts, slo_texts, compare_texts, error_texts).

Each of those modules keeps its own table, {"en": {key: template}, "zh": {key: template}}, and
names it by subclassing `Text` and `Joined` with `table = WORDS`. A library function that builds a
sentence returns a Text: a str whose value is the English sentence (what JSON, logs and English
callers see, to the character), which also keeps its template key and values, so that a command
printing in Chinese says the same facts with `say(text, "zh")`. Values may themselves be Texts or
Joined lists, said in the same language; anything else is spliced in as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from scm_xl.rules import Lang

Table = Mapping[Lang, Mapping[str, str]]  # language -> key -> template


def templates(table: Table, lang: Lang) -> Mapping[str, str]:
    """The templates of `lang` (English for a language the table does not have)."""
    return table.get(lang, table["en"])


def say(value: Any, lang: Lang = "en") -> Any:
    """Anything with a `say(lang)` (a Text, a Joined, a list like compare's Levels) in `lang`;
    anything else as it is (a plain str says itself)."""
    speak = getattr(value, "say", None)
    return speak(lang) if callable(speak) else value


def render(table: Table, key: str, values: Mapping[str, Any], lang: Lang) -> str:
    """The template `key` of `table` in `lang`, with `values` said in `lang` spliced in."""
    return templates(table, lang)[key].format(**{name: say(value, lang) for name, value in values.items()})


class Text(str):
    """A sentence from a template of the subclass's `table`: the str is its English; `say(lang)`
    words it in another language from the same values."""

    table: ClassVar[Table]
    key: str
    values: dict[str, Any]

    def __new__(cls, key: str, /, **values: Any) -> Text:
        self = super().__new__(cls, render(cls.table, key, values, "en"))
        self.key, self.values = key, values
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # copy, deepcopy and pickle rebuild it from its template
        return (_rebuild, (type(self), self.key, self.values))

    def say(self, lang: Lang = "en") -> str:
        return render(self.table, self.key, self.values, lang)


def _rebuild(cls: type[Text], key: str, values: dict[str, Any]) -> Text:
    return cls(key, **values)


@dataclass(frozen=True)
class Joined:
    """Items (Texts or plain values) joined by the separator `sep`, a key of the subclass's table."""

    table: ClassVar[Table]
    items: tuple[Any, ...]
    sep: str = "list_sep"

    def __str__(self) -> str:
        return self.say("en")

    def say(self, lang: Lang = "en") -> str:
        return templates(self.table, lang)[self.sep].join(str(say(item, lang)) for item in self.items)
