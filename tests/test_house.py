"""The shape of the house: imports run downward only, the pure reference knows nothing of the
workbook or the command line, and a long module says why it is long."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from support.source import parsed

PACKAGE = Path(__file__).resolve().parent.parent / "scm_xl"
# The reference and the physics: pure, no workbook, no CLI, no I/O of their own.
PURE = ("model", "lsq", "constrained", "replicates", "roofline", "physics", "rules", "stats")
LONG = 650  # lines; a module above this states why at its top ("Long because ...")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _runtime_imports(tree: ast.AST) -> list[ast.ImportFrom | ast.Import]:
    """Every import executed at run time, function-level ones included (an import hidden in a
    function to dodge a circle is still a circle); `if TYPE_CHECKING:` blocks are not run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    return [node for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped]


@functools.cache  # the package's sources do not change during a run; three tests read the graph
def import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in _runtime_imports(parsed(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if not node.module or not node.module.startswith("scm_xl"):
                    continue
                for alias in node.names:
                    candidate = f"{node.module}.{alias.name}"
                    deps.add(candidate if candidate in modules else node.module)
            else:
                deps |= {alias.name for alias in node.names if alias.name.startswith("scm_xl")}
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                found.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_import_circle_anywhere() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_reference_imports_nothing_from_the_workbook_or_the_cli() -> None:
    graph = import_graph()
    for name in PURE:
        module = f"scm_xl.{name}"
        if module not in graph:
            continue
        bad = sorted(d for d in graph[module] if d.startswith(("scm_xl.workbook", "scm_xl.cli")))
        assert not bad, f"{module} imports {bad}"


def upward_from_the_byte_layer(graph: dict[str, set[str]]) -> list[str]:
    """Imports from the byte layer (scm_xl.xlsx) up into the workbook, the engines or the CLI."""
    return sorted(f"{module} -> {dep}" for module, deps in graph.items() if module.startswith("scm_xl.xlsx")
                  for dep in deps if dep.startswith(("scm_xl.workbook", "scm_xl.engines", "scm_xl.cli")))


def test_the_byte_layer_imports_nothing_above_it() -> None:
    """scm_xl.xlsx (packages, sheet XML, cached values) is below the workbook and the engines,
    which both use it; the check fails on a planted upward import."""
    graph = import_graph()
    assert any(module.startswith("scm_xl.xlsx.") for module in graph)
    assert upward_from_the_byte_layer(graph) == []
    planted = {**graph, "scm_xl.xlsx.package": graph["scm_xl.xlsx.package"] | {"scm_xl.workbook.styles"}}
    assert upward_from_the_byte_layer(planted) == ["scm_xl.xlsx.package -> scm_xl.workbook.styles"]


def test_a_long_module_says_why() -> None:
    unexplained = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG:
            docstring = ast.get_docstring(parsed(text)) or ""
            if "Long because" not in docstring:
                unexplained.append(f"{path.relative_to(PACKAGE.parent)} ({text.count(chr(10))} lines)")
    assert not unexplained, unexplained


TESTS = Path(__file__).resolve().parent


def imported_test_modules(source: str) -> list[str]:
    """The test modules a test module's source imports (`from test_x import ...`, `import test_x`),
    at any depth (a function-level import counts)."""
    found = []
    for node in ast.walk(parsed(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0].startswith("test_"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0].startswith("test_")]
    return found


def test_no_test_module_imports_another() -> None:
    """Shared helpers and fixtures live in the toolbox (tests/support/, conftest.py), not in a test
    module another one imports (which runs that module's fixtures and tests' imports twice, and ties
    two files together)."""
    offenders = {path.name: imported_test_modules(path.read_text(encoding="utf-8"))
                 for path in sorted(TESTS.glob("test_*.py"))}
    assert {name: found for name, found in offenders.items() if found} == {}
    assert imported_test_modules("from test_collector import raw_server\nimport test_x as y\n") == [
        "test_collector", "test_x"]  # the check can see one


HEAVY = ("numpy", "openpyxl", "ironcalc", "httpx")  # what only the commands that use them load


def test_the_command_line_imports_light() -> None:
    """`import scm_xl.cli` (every command's first step, `scm-xl -h` included) loads none of the
    heavy libraries: the engines, the workbook and the collector's transport load them when a
    command runs."""
    import subprocess
    import sys

    code = ("import sys, scm_xl.cli\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=PACKAGE.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_scheduling_lists_name_modules_that_exist() -> None:
    """conftest's WAITING_MODULES and LONGEST_FIRST steer xdist by module name: a renamed module
    would silently lose its place (a waiting module computing beside two others, a long one last)."""
    from conftest import LONGEST_FIRST, WAITING_MODULES

    modules = {path.stem for path in TESTS.glob("test_*.py")}
    assert sorted(set(LONGEST_FIRST) - modules) == [] and sorted(WAITING_MODULES - modules) == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST) and not set(LONGEST_FIRST) & WAITING_MODULES
