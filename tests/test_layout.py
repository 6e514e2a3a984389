"""The package's layout figures, kept true: no import cycle, no module over 450 lines, no
function-local import of specdec but a lazy loader's, and no benchmark importing a test helper
(issue "One frame", item 6).

Static: every file is parsed with ``ast``, nothing is imported. An import counts wherever it is
written: at module level, under ``if TYPE_CHECKING:``, or inside a function (a function-local
import that only hides a cycle is still the cycle). A package's ``__init__`` re-exporting its
children is not an edge of design: the ``__init__`` files' own imports are left out (an import
*of* a package still points at it). A function-local import of specdec is written at the top
unless it loads something heavy on use (``LAZY_IMPORTS``, each with its reason). Each checker is
first run on a small package written here with what it looks for hidden each way, so a green
run means the checker works, not that it sees nothing.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 450


_AUDIT_ON_USE = "the audit loaded on use: --help and the other commands load no statistics"
LAZY_IMPORTS = {
    "specdec/cli.py:load_function": _AUDIT_ON_USE,
    "specdec/cli.py:_run_audit": _AUDIT_ON_USE,
    "specdec/demo.py:run_model_demo": "transformers, for the SmolLM2 demo alone",
    "specdec/testing/audit/judging/stream.py:as_causal_lm": (
        "transformers (models.hf), for an HF model"
    ),
    "specdec/testing/audit/arguments.py:__call__": "--list-scenarios: the parser is built for "
    "every command, the catalogue loads the audit",
    "specdec/testing/audit/command_output.py:plot_problem": "matplotlib (plots), for --plot",
    "specdec/testing/audit/command_output.py:plot": "matplotlib (plots), for --plot",
}
"""``"path:function"``: the function-local imports of specdec allowed, each a lazy loader of
something heavy (``tests/test_cli_help.py`` checks what ``--help`` loads), with its reason."""

Edges = dict[str, dict[str, str]]
"""``module -> {imported module: "path:line" of the first import}``."""


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import statement may bind: the module and each ``module.name``."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:  # relative: anchored at the module's package
            anchor = module.split(".") if is_package else module.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            source = ".".join(anchor + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        yield source
        yield from (f"{source}.{alias.name}" for alias in node.names)


def import_graph(root: Path, package: str) -> Edges:
    """Every import between the modules of ``root/package`` (module level, ``TYPE_CHECKING``
    and function-local alike), leaving out the ``__init__`` files' own imports."""
    files = {_module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}
    graph: Edges = {name: {} for name, path in files.items() if path.name != "__init__.py"}
    for name in graph:
        path = files[name]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for target in _imported(node, name, is_package=False):
                if target in files and target != name and target != package:
                    where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
                    graph[name].setdefault(target, where)
    return graph


def function_local_imports(root: Path, package: str) -> list[tuple[str, str]]:
    """Every import of ``root/package``'s modules written inside a function, as
    ``("path:function", "path:line")``, the function the innermost one around it."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        module = _module_name(path, root)
        innermost: dict[ast.AST, str] = {}  # ast.walk is breadth-first: inner functions last
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                innermost.update({child: node.name for child in ast.walk(node)})
        where = path.relative_to(root).as_posix()
        for node, function in innermost.items():
            targets = _imported(node, module, is_package=path.name == "__init__.py")
            if any(t == package or t.startswith(f"{package}.") for t in targets):
                found.append((f"{where}:{function}", f"{where}:{getattr(node, 'lineno', 0)}"))
    return sorted(found)


def strongly_connected(graph: Edges) -> list[frozenset[str]]:
    """The groups of two or more modules that import each other, directly or around a loop
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, {})))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            step = next((t for t in targets if t in graph), None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(graph[step])))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(frozenset(group))
    return found


def _described(group: frozenset[str], graph: Edges) -> str:
    arrows = [
        f"{source} -> {target} ({where})"
        for source in sorted(group)
        for target, where in graph[source].items()
        if target in group
    ]
    return "; ".join(arrows)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    "hidden",
    [
        "from pkg.b import B\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "def f():\n    from .b import B\n    return B\n",
    ],
    ids=["module-level", "type-checking", "function-local-relative"],
)
def test_the_checker_finds_a_cycle_however_it_is_hidden(tmp_path: Path, hidden: str) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\nfrom pkg.b import B\n",  # re-exports
            "pkg/a.py": hidden + "A = 1\n",
            "pkg/b.py": "import pkg.c\nB = 2\n",
            "pkg/c.py": "from pkg import a\n",  # a package's child, imported by name
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert strongly_connected(graph) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]


def test_the_checker_leaves_out_a_package_reexporting_its_children(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": "import pkg\nA = 1\n",  # the package itself: not an edge
        },
    )
    assert strongly_connected(import_graph(tmp_path, "pkg")) == []


def test_no_import_cycle_between_specdec_modules() -> None:
    graph = import_graph(ROOT, "specdec")
    assert len(graph) > 100  # the walk found the package
    cycles = list(strongly_connected(graph))
    assert not cycles, "\n".join(_described(group, graph) for group in cycles)


def test_no_specdec_module_over_450_lines() -> None:
    lengths = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for path in (ROOT / "specdec").rglob("*.py")
    }
    assert len(lengths) > 100
    over = {path: n for path, n in lengths.items() if n > MAX_LINES}
    assert not over, sorted(over.items())


def test_the_checker_finds_a_function_local_import_however_it_is_written(
    tmp_path: Path,
) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "def lazy():\n    from pkg import a\n",
            "pkg/a.py": (
                "import json\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from pkg.b import B\n"  # module level: not function-local
                "def f():\n    import json, pkg.b\n"
                "class C:\n    async def g(self):\n        from .b import B\n"
                "        def inner():\n            from pkg import b\n"
                "def h():\n    import json\n    from os import path\n"  # other packages
            ),
            "pkg/b.py": "B = 2\n",
        },
    )
    assert function_local_imports(tmp_path, "pkg") == [
        ("pkg/__init__.py:lazy", "pkg/__init__.py:2"),
        ("pkg/a.py:f", "pkg/a.py:6"),
        ("pkg/a.py:g", "pkg/a.py:9"),
        ("pkg/a.py:inner", "pkg/a.py:11"),
    ]


def test_no_function_local_specdec_import_but_a_lazy_loader() -> None:
    """A function-local import that hides nothing is written at the top of its module; the
    allowed ones load something heavy on use (``LAZY_IMPORTS``), and each entry still names
    one (none left stale)."""
    found = function_local_imports(ROOT, "specdec")
    assert set(LAZY_IMPORTS) <= {function for function, _ in found}, sorted(LAZY_IMPORTS)
    local = [where for function, where in found if function not in LAZY_IMPORTS]
    assert not local, local


def test_benchmarks_import_no_test_helper() -> None:
    found = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        module = _module_name(path, ROOT)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for target in _imported(node, module, is_package=path.name == "__init__.py"):
                if target == "tests" or target.startswith("tests."):
                    found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    assert len(list((ROOT / "benchmarks").glob("bench_*.py"))) > 5
    assert not found, sorted(set(found))


AUDIT = "specdec.testing.audit"
AUDIT_LAYERS = ("contract", "scenarios", "running", "reporting", "judging")
"""The audit's subpackages, lowest first (``docs/architecture.md``, "The folder"). A module
imports from its own layer or a lower one; the audit's top-level modules (the door, the plan,
the command) sit above every layer, so no subpackage imports them."""


def upward_imports(graph: Edges, package: str, layers: tuple[str, ...]) -> list[str]:
    """Every import of ``graph`` from a lower layer of ``package`` into a higher one, as
    ``"source -> target (path:line)"``; ``package``'s own modules are the top layer."""

    def layer(module: str) -> int | None:
        for rank, name in enumerate(layers):
            if module == f"{package}.{name}" or module.startswith(f"{package}.{name}."):
                return rank
        return len(layers) if module.startswith(f"{package}.") else None

    found = []
    for source, targets in graph.items():
        low = layer(source)
        for target, where in targets.items():
            high = layer(target)
            if low is not None and high is not None and high > low:
                found.append(f"{source} -> {target} ({where})")
    return sorted(found)


@pytest.mark.parametrize(
    "hidden",
    [
        "from pkg.top import T\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high.h import H\n",
        "def f():\n    from ..high import h\n    return h\n",
    ],
    ids=["into-the-top", "type-checking", "function-local-relative"],
)
def test_the_checker_finds_an_upward_import_however_it_is_hidden(
    tmp_path: Path, hidden: str
) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.top import T\n",
            "pkg/top.py": "from pkg.low.l import L\nfrom pkg.high.h import H\nT = 0\n",
            "pkg/low/__init__.py": "",
            "pkg/low/l.py": hidden + "L = 1\n",
            "pkg/high/__init__.py": "",
            "pkg/high/h.py": "from pkg.low import l\nH = 2\n",  # downward: allowed
        },
    )
    found = upward_imports(import_graph(tmp_path, "pkg"), "pkg", ("low", "high"))
    assert found and all(arrow.startswith("pkg.low.l -> pkg.") for arrow in found), found


def test_the_audit_layers_import_only_downward() -> None:
    graph = import_graph(ROOT, "specdec")
    for name in AUDIT_LAYERS:  # each layer is a package with modules in it
        assert (ROOT / "specdec/testing/audit" / name / "__init__.py").is_file(), name
        assert any(module.startswith(f"{AUDIT}.{name}.") for module in graph), name
    assert not upward_imports(graph, AUDIT, AUDIT_LAYERS)
