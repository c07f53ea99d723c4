"""Text inside formulas: string literals and the TEXTS templates spliced with expressions.

The one home of formula quoting: every sheet module writes its strings through `q`.
"""

from __future__ import annotations


def q(text: str) -> str:
    """A string literal for a formula."""
    return '"' + text.replace('"', '""') + '"'


def text_with(template: str, **values: str) -> str:
    """A formula expression rendering a TEXTS template, splicing in expressions."""
    parts: list[str] = []
    rest = template
    while "{" in rest:
        before, _, tail = rest.partition("{")
        name, _, rest = tail.partition("}")
        if before:
            parts.append(q(before))
        parts.append(values[name])
    if rest:
        parts.append(q(rest))
    return "&".join(parts) if parts else q("")
