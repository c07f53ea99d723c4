"""The package's and the tests' own sources as syntax trees, for the tests that read the code."""

from __future__ import annotations

import ast
import functools


@functools.lru_cache(maxsize=None)
def parsed(source: str) -> ast.Module:
    """`ast.parse(source)`, once per text in a worker: the house tests walk every module of the
    package several times over (about 4 CPU-seconds a run when each parsed it again). The tree is
    shared: read it, never change it."""
    return ast.parse(source)
