"""The package's shape: no import cycles (deferred imports included), OR-Tools only where it belongs,
every method in the registry importable and consistent."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
from dirs import TESTS

import placer
from placer.algorithms import registry

ROOT = Path(placer.__file__).parent

# modules allowed to import OR-Tools: the adapter and the CP-SAT model builders
ORTOOLS_MODULES = {
    "placer.algorithms.ortools_adapter",
    "placer.algorithms.cpsat.models",
    "placer.algorithms.cpsat.arcflow",
    "placer.algorithms.cpsat.core",
    "placer.algorithms.cpsat.stage_degrees",
    "placer.algorithms.cpsat.joint",
}

# cycles tolerated for now: none (the spec loader and the Hugging Face importer no longer import
# each other); a cycle added here stays visible, and no other can hide behind it
KNOWN_CYCLES: list[set[str]] = []


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(placer modules imported anywhere in the file, top-level packages imported); imports under
    ``if TYPE_CHECKING:`` are annotations only and do not count."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for sub in ast.walk(node):
                skip.add(id(sub))
    out, external = set(), set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                external.add(alias.name.split(".")[0])
                if alias.name in known:
                    out.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
                external.add(target.split(".")[0])
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    out.add(sub)            # a submodule
                elif target in known:
                    out.add(target)         # a name defined by the module (or package) itself
    return out, external


def _graph() -> tuple[nx.DiGraph, dict[str, set[str]]]:
    mods = _modules()
    known = set(mods)
    g = nx.DiGraph()
    external: dict[str, set[str]] = {}
    for name, path in mods.items():
        g.add_node(name)
        deps, ext = _imports(name, path, known)
        external[name] = ext
        for d in deps:
            if d != name:
                g.add_edge(name, d)
    # the registry imports methods by name on first use: those are imports too
    for row in registry.REGISTRY.values():
        g.add_edge("placer.algorithms.registry", row.target.partition(":")[0])
    return g, external


def test_no_import_cycles():
    g, _ = _graph()
    cycles = [set(c) for c in nx.simple_cycles(g)]
    unexpected = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert unexpected == []


def test_the_walk_sees_deferred_imports():
    """The walk must see an import inside a function, or the cycle test could not fail."""
    g, _ = _graph()
    # explain loads the CP-SAT core only when a core is wanted (an import inside a function)
    assert g.has_edge("placer.planning.studies.explain", "placer.algorithms.cpsat.core")
    assert g.has_edge("placer.algorithms.registry", "placer.algorithms.cpsat")


def test_ortools_only_in_the_adapter_and_model_builders():
    _, external = _graph()
    users = {name for name, ext in external.items() if "ortools" in ext}
    assert users == ORTOOLS_MODULES


def test_no_ortools_object_reaches_other_modules():
    """OR-Tools handed on by name (``from .models import cp_model``) would slip past the import
    check: no module outside the adapter and the model builders names its model or solver."""
    names = {"cp_model", "CpModel", "CpSolver", "CpSolverSolutionCallback"}
    users = set()
    for name, path in _modules().items():
        tree = ast.parse(path.read_text())
        found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
            {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | \
            {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        if found & names:
            users.add(name)
    assert users <= ORTOOLS_MODULES, sorted(users - ORTOOLS_MODULES)


def test_registry_rows_resolve():
    for row in registry.REGISTRY.values():
        assert callable(row.function), row.name
        assert set(row.modes) <= {"contiguous", "free", "split"}
    assert registry.EXACT_METHODS == ("cpsat", "dp")
    assert "bound" not in registry.PLACING_METHODS


def test_tests_do_not_import_the_tests_directory_as_a_package():
    """CI runs the README's plain ``pytest``, which does not put the checkout on ``sys.path``, so
    ``from tests.x import y`` works under ``python -m pytest`` only; helpers come from conftest
    fixtures or from modules imported by their own name (the tests directory is on the path).
    Every folder of tests is walked (the vendored runtime code aside, which is not placer's)."""
    paths = sorted(p for p in TESTS.rglob("*.py") if "vendored" not in p.relative_to(TESTS).parts)
    assert TESTS / "package" / "test_structure.py" in paths and TESTS / "conftest.py" in paths
    offenders = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{path.relative_to(TESTS)}:{node.lineno}" for n in names if n == "tests" or n.startswith("tests.")]
    assert not offenders, offenders


# a module or function a reader holds in their head: these limits, and the planning entry point alone
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
MAX_PARAMETERS = 10          # a click command takes one per flag and is exempt


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return count - (names[:1] in (["self"], ["cls"]))


def _is_click_command(node) -> bool:
    return any("command" in ast.unparse(d) for d in node.decorator_list)


def test_modules_and_functions_stay_small():
    long_modules, long_functions, many_parameters = [], [], []
    for name, path in _modules().items():
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            long_modules.append((name, text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append((f"{name}.{node.name}", length))
                if _parameters(node) > MAX_PARAMETERS and not _is_click_command(node):
                    many_parameters.append((f"{name}.{node.name}", _parameters(node)))
    assert not long_modules, long_modules
    assert not long_functions, long_functions
    assert not many_parameters, many_parameters


def test_the_size_check_counts_parameters_as_written():
    tree = ast.parse("def f(self, a, b=1, *c, d, **e): pass\n@cli.command()\ndef g(x): pass")
    f, g = tree.body
    assert _parameters(f) == 5 and not _is_click_command(f) and _is_click_command(g)


def test_one_module_orchestrates_the_placement_step():
    """Instance -> place -> per-device result -> mapping is written in placer.planning.solve only:
    no other module both places an instance and converts the result to devices or builds a mapping."""
    offenders = []
    for name, path in _modules().items():
        if name.startswith(("placer.algorithms", "placer.planning.solve")) or name == "placer.problem.reductions.tensor_parallel":
            continue
        calls = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
                 for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)}
        if "place" in calls and calls & {"per_device", "build_mapping"}:
            offenders.append(name)
    assert not offenders, offenders


# the layers, lowest first: a module may import its own layer and those below it, never one above
# (docs/architecture.md draws the same order); the package's own __init__ re-exports from any layer
LAYERS = {"specs": 0, "problem": 1, "algorithms": 2, "mapping": 3, "simulate": 4, "planning": 5,
          "export": 6, "executor": 6, "plotting": 6, "cli": 7}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_layers_import_downward_only():
    g, _ = _graph()
    upward = [(a, b) for a, b in g.edges() if _layer(a) and _layer(b) and LAYERS[_layer(a)] < LAYERS[_layer(b)]]
    assert upward == []


def test_the_layer_check_sees_an_upward_import():
    """The rank check must be able to fail: a made-up edge from specs up to planning is upward."""
    assert LAYERS[_layer("placer.specs.model")] < LAYERS[_layer("placer.planning.planner")]
    assert set(LAYERS) == {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def test_the_package_root_is_a_dozen_entries():
    tracked = sorted(p.name for p in ROOT.iterdir() if p.name != "__pycache__")
    assert len(tracked) <= 12, tracked
    assert [p.name for p in ROOT.glob("*.py")] == ["__init__.py"]


def test_import_placer_stays_light():
    """``import placer`` loads the specs and the instance, not the Hugging Face importer, OR-Tools or torch."""
    code = ("import sys, placer; heavy = [m for m in sys.modules if m.startswith(('placer.specs.hf.meta', "
            "'ortools', 'torch', 'transformers', 'placer.planning', 'placer.cli', 'simpy'))]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
