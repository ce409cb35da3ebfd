"""The import structure of layout_core (docs/architecture.md, "Layers"): no circles, every
import points to the same layer or a lower one, and an import inside a function says why."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import PROJECT

PACKAGE = PROJECT / "layout_core"

# Top to bottom; a package may import its own layer (without circles) and those below.
LAYERS = (
    ("cli",),
    ("airflow", "bench", "check"),
    ("flows",),
    ("runs",),
    ("spark",),
    ("optimizers",),
    ("workload", "skipping"),
    ("catalog", "sql"),
    ("algorithms", "predicates"),
    ("base", "schemas"),  # schemas: the YAML schema files base.schema loads
)
LAYER_OF = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported layout_core module, line, inside a function) of every import in the file."""
    tree = ast.parse(path.read_text())
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("layout_core"):
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("layout_core")]
        else:
            continue
        found += [(name, node.lineno, id(node) in inner) for name in names]
    return found


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {m: {name for name, _, _ in imports(p) if name in MODULES and name != m} for m, p in MODULES.items()}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    # deep enough for the package's graph, and put back after: a process left at 10,000
    # overflows the C stack (a segfault, not a RecursionError) in the deep-query tests
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_circles_are_found():
    """The detector itself: a -> b -> c -> a is one circle, d alone is none."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    assert circles(GRAPH) == []


def test_every_package_has_a_layer():
    packages = {package_of(m) for m in MODULES} - {None}
    assert packages == set(LAYER_OF), "a new package needs its place in LAYERS and docs/architecture.md"


def test_imports_point_down():
    upward = []
    for module, path in sorted(MODULES.items()):
        here = package_of(module)
        for name, line, _ in imports(path):
            there = package_of(name)
            if here and there and there != here and LAYER_OF[there] < LAYER_OF[here]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} {here} imports {name}")
    assert upward == []


def test_imports_inside_functions_say_why():
    """An import inside a function keeps a heavy module (pyspark, matplotlib, ...) off a
    path that must stay light; a comment on its line (or the line above) says which."""
    silent = []
    for module, path in sorted(MODULES.items()):
        lines = path.read_text().splitlines()
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and not said_why(lines, node):
                    silent.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert silent == []


def said_why(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's lines, or on the line above the block of imports it is in."""
    if any("#" in lines[n - 1] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)):
        return True
    above = node.lineno - 2
    while above >= 0 and part_of_imports(lines[above]):
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def part_of_imports(line: str) -> bool:
    text = line.strip()
    return text.startswith(("from ", "import ")) or text == ")" or (text.endswith(",") and "#" not in text)


@pytest.mark.parametrize("module", ["layout_core.base.names", "layout_core.base.params", "layout_core.base.errors",
                                    "layout_core.base.urls", "layout_core.base.jvm", "layout_core.flows.names",
                                    "layout_core.runs.paths"])
def test_light_modules_import_only_the_standard_library(module):
    """The DAG files and the Airflow pages import these: nothing outside the standard
    library and layout_core's own light modules may come with them."""
    code = ("import sys; before = set(sys.modules); import " + module + ";"
            "print(' '.join(sorted(m for m in set(sys.modules) - before if '.' not in m "
            "and m not in sys.stdlib_module_names and m != 'layout_core')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
