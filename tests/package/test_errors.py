"""Library errors name fields, the command line names flags (issue 10, Structure).

A library call (make_instance, simulate, solve_degrees, ...) that refuses an argument raises
:class:`InvalidSpec` with source :data:`placer.specs.errors.ARGUMENT` and the argument's own name as the
field, so a caller of the library never reads a flag it did not use; the command line replaces the
source with the flag that sets that field and keeps the one-line format and exit 2.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from dirs import OK_INPUTS, ROOT

from placer import load_fleet, load_model, make_instance, workload_for
from placer.algorithms import place
from placer.problem.instance import Layout, Pin
from placer.specs.errors import ARGUMENT, InvalidSpec

OK = OK_INPUTS


def _flag_sources(root: Path = ROOT) -> list[str]:
    """``file:line`` of every InvalidSpec(...) outside placer/cli whose source is a literal flag."""
    found = []
    for path in sorted((root / "placer").rglob("*.py")):
        if "cli" in path.relative_to(root / "placer").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
                    == "InvalidSpec" and node.args):
                continue
            first = node.args[0]
            text = first.value if isinstance(first, ast.Constant) else (
                first.values[0].value if isinstance(first, ast.JoinedStr) and first.values
                and isinstance(first.values[0], ast.Constant) else None)
            if isinstance(text, str) and text.startswith("-"):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_library_error_is_named_after_a_flag():
    assert _flag_sources() == []


def test_the_scan_sees_a_flag_source(tmp_path):
    """The scan above finds what it looks for (a literal and an f-string flag)."""
    pkg = tmp_path / "placer"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "lib.py").write_text('raise InvalidSpec("--pin", "pins", "x")\nraise InvalidSpec(f"--{n}", n, "x")\n')
    (pkg / "cli" / "ok.py").write_text('raise InvalidSpec("--pin", "pins", "x")\n')
    assert _flag_sources(tmp_path) == ["placer/lib.py:1", "placer/lib.py:2"]


def _tiny():
    model = load_model(str(OK / "tiny.yaml"))
    return model, load_fleet(str(OK / "tinyhw.yaml")), workload_for(model)


def test_a_library_call_names_the_argument():
    model, fleet, wl = _tiny()
    with pytest.raises(InvalidSpec) as exc:
        make_instance(model, fleet, wl, pins=[Pin((0,), "r99w9")])
    assert (exc.value.source, exc.value.field) == (ARGUMENT, "pins")
    assert "r99w9" in exc.value.message and "--" not in str(exc.value)
    with pytest.raises(InvalidSpec) as exc:
        make_instance(model, fleet, wl, mode="diagonal")
    assert (exc.value.source, exc.value.field) == (ARGUMENT, "mode")
    with pytest.raises(InvalidSpec) as exc:
        make_instance(model, fleet, wl, mode="contiguous", layout=Layout(tp=0))
    assert (exc.value.source, exc.value.field) == (ARGUMENT, "tp")


def test_simulate_names_its_argument():
    from placer.simulate import Serving, simulate

    model, fleet, wl = _tiny()
    inst = make_instance(model, fleet, wl)
    r = place(inst, "dp")
    with pytest.raises(InvalidSpec) as exc:
        simulate(inst, r.assignment, serving=Serving(max_batch=0))
    assert (exc.value.source, exc.value.field) == (ARGUMENT, "max_batch")
    assert str(exc.value) == "<argument>: max_batch: must be at least 1"


def test_the_command_line_names_the_flag(run_cli, tmp_path, monkeypatch):
    """The same errors through the command line: the flag the user typed, the field, one line, exit 2."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["solve", OK / "tiny.yaml", "-H", OK / "tinyhw.yaml", "--pin", "0=r99w9"])
    assert (code, out) == (2, "") and err == "error: --pin: pins: unknown device 'r99w9'\n"
    code, out, err = run_cli(["solve", OK / "tiny.yaml", "-H", OK / "tinyhw.yaml", "--mode", "split", "--tp", "2"])
    assert code == 2 and err.startswith("error: --tp: tp: tiny runs at none of the degrees asked for (tp 2: ")
    assert err.count("\n") == 1
    # a flag whose parameter has another name (sweep's --tp holds ``tps``) still names the flag
    code, out, err = run_cli(["sweep", OK / "tiny.yaml", "-H", OK / "tinyhw.yaml", "--tp", "0", "--concurrency", "1"])
    assert (code, out, err) == (2, "", "error: --tp: tp: a degree is a positive integer\n")
    assert list(tmp_path.iterdir()) == []


def test_kimi_pin_of_a_missing_layer_names_pins():
    model = load_model("kimi-k3")
    with pytest.raises(InvalidSpec) as exc:
        make_instance(model, load_fleet("wse-3t"), workload_for(model), pins=[Pin((10**6,), "r0w0")])
    assert (exc.value.source, exc.value.field) == (ARGUMENT, "pins") and "out of range" in exc.value.message
