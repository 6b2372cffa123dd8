"""Catalog names on the command line: matched without regard to case, and a misspelt name gets the
nearest catalog names, the same one-line error from every command that takes one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from placer.cli import cli
from placer.specs.catalog import project_root

MAPPING = project_root() / "solutions" / "kimi-k3__wse-3t__contiguous.json"
BAD_MODEL, BAD_HARDWARE = "kimi-k33", "wse3t"
MODEL_HINT = "did you mean kimi-k3, kimi-k2 or kimi-k3-hf?"
HARDWARE_HINT = "did you mean wse-3t, wse-3 or wse-2?"

# every command, each way it takes a catalog name: (argv with {m} = a model name, {h} = a hardware name)
NAME_RUNS = {
    "inspect": [["inspect", "{m}"], ["inspect", "kimi-k3", "-H", "{h}"]],
    "solve": [["solve", "{m}", "-H", "wse-3t"], ["solve", "kimi-k3", "-H", "{h}"]],
    "compare": [["compare", "{m}", "-H", "wse-3t"], ["compare", "kimi-k3", "-H", "{h}"]],
    "plan": [["plan", "{m}", "-H", "wse-3t", "-n", "10"], ["plan", "kimi-k3", "-H", "{h}", "-n", "10"]],
    "sweep": [["sweep", "{m}", "-H", "wse-3t"], ["sweep", "kimi-k3", "-H", "{h}"]],
    "simulate": [["simulate", "--compare", "{m}", "-H", "wse-3t"], ["simulate", "--compare", "kimi-k3", "-H", "{h}"],
                 ["simulate", MAPPING, "--model", "{m}"], ["simulate", MAPPING, "-H", "{h}"]],
    "validate": [["validate", MAPPING, "--model", "{m}"], ["validate", MAPPING, "-H", "{h}"]],
    "export": [["export", MAPPING, "--format", "json", "--model", "{m}"],
               ["export", MAPPING, "--format", "json", "-H", "{h}"]],
    "run": [["run", MAPPING, "--model", "{m}"], ["run", MAPPING, "-H", "{h}"]],
    "plot": [["plot", MAPPING, "-o", "{out}", "-H", "{h}"]],
    "frontier": [["frontier", "{m}", "-H", "wse-3t"], ["frontier", "kimi-k3", "-H", "wse-3t,{h}"]],
    "replan": [["replan", MAPPING, "--failed", "r0w0", "--model", "{m}"],
               ["replan", MAPPING, "--failed", "r0w0", "-H", "{h}"]],
    # its models are named in the plan file (a misspelt one: the file and models[k].model)
    "plan-fleet": [["plan-fleet", project_root() / "examples" / "fleet_plans" / "wafer_fleet.yaml", "-H", "{h}"]],
}
# commands that take no catalog name (import-hf reads a config.json file)
NO_NAMES = {"models", "hardware", "schema", "import-hf"}


def test_every_command_is_covered():
    commands = set(cli.list_commands(None))
    missing = commands - set(NAME_RUNS) - NO_NAMES
    assert not missing, f"add the new command(s) to NAME_RUNS or NO_NAMES: {sorted(missing)}"


def _cases():
    for command, runs in NAME_RUNS.items():
        for i, argv in enumerate(runs):
            yield pytest.param(argv, id=f"{command}-{i}")


@pytest.mark.skipif(not MAPPING.exists(), reason="solutions/ is empty: run `python tools/regenerate_solutions.py`")
@pytest.mark.parametrize("argv", list(_cases()))
def test_misspelt_catalog_name_gets_a_suggestion(argv, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad, hint, field = ((BAD_MODEL, MODEL_HINT, "model") if "{m}" in argv
                        else (BAD_HARDWARE, HARDWARE_HINT, "hardware"))
    argv = [str(a).replace("{m}", BAD_MODEL).replace("{h}", BAD_HARDWARE).replace("{out}", "x.png") for a in argv]
    code, out, err = run_cli(argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: {bad}: {field}: no {field} of that name in the catalog; {hint} (catalog: ")
    assert list(tmp_path.iterdir()) == []


def test_misspelt_command_gets_a_suggestion(run_cli):
    code, out, err = run_cli(["sovle", "kimi-k3"])
    assert code == 2 and out == ""
    assert err.startswith("error: sovle: (command): no such command; did you mean solve? (commands: compare, ")
    assert err.count("\n") == 1


def test_catalog_names_match_without_regard_to_case(run_cli):
    code, out, err = run_cli(["solve", "KIMI-K3", "-H", "WSE-3T", "--method", "dp", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["model"]["name"], doc["hardware"]["name"], doc["summary"]["devices_used"]) == ("kimi-k3", "wse-3t", 70)
    code, out, err = run_cli(["inspect", "Llama-3.1-70B", "-H", "H100", "--json"])
    assert code == 0, err
    assert json.loads(out)["model"] == "llama-3.1-70b"


def test_an_unknown_name_with_nothing_near_lists_the_catalog(run_cli):
    code, _, err = run_cli(["inspect", "zzzzzz"])
    assert code == 2
    line = err.strip()
    assert "did you mean" not in line
    listed = re.search(r"\(catalog: ([^;]+);", line).group(1).split(", ")
    assert listed == sorted(p.stem for p in Path(project_root() / "models").glob("*.yaml"))
