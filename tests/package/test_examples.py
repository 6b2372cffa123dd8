"""The scripts in examples/ run as a user runs them, and print what the library computes."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from dirs import ROOT


def _run(name: str, *args) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / name), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_example_is_tested():
    tested = {"plan_a_model.py", "compare_methods.py", "speed_floor.py", "export_to_vllm.py", "plan_a_fleet.py"}
    assert {p.name for p in (ROOT / "examples").glob("*.py")} == tested


@pytest.mark.slow
def test_plan_a_model_writes_the_proven_70_wafers(tmp_path):
    """(K K | K | M) x 23 + M = 70 contiguous wafers for Kimi K3 at 256k, each MLA wafer holding
    floor(27,870,967,742 / 150,994,944) = 184 live requests (README's worked example, by hand)."""
    import json

    out = _run("plan_a_model.py", "kimi-k3", "wse-3t", tmp_path / "m.json")
    assert "kimi-k3 on wse-3t: 70 devices, 70 stages, concurrency ceiling 184" in out
    assert "devices: 70 (bound 70, proven)" in out
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["summary"]["devices_used"] == 70 and len(doc["stages"]) == 70


@pytest.mark.slow
def test_compare_methods_shows_the_published_count_beside_the_pipeline():
    out = _run("compare_methods.py")
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines()[1:]}
    assert rows[("typepack", "free")][0] == "59"          # the published recipe's count
    assert rows[("dp", "contiguous")] == ["70", "70", "yes"]
    assert rows[("cpsat", "contiguous")] == ["70", "70", "yes"]


@pytest.mark.slow
def test_speed_floor_meets_its_floor_for_every_request():
    out = _run("speed_floor.py", 20, 16)
    m = re.search(r"(\d+) GPUs: (\d+) replica\(s\) of (\d+), (\d+) live requests each, ([\d.]+) tokens/s", out)
    assert m, out
    gpus, replicas, each, load, speed = int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5])
    assert gpus == replicas * each and replicas * load >= 16 and speed >= 20.0


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["vllm"])
def test_export_prints_a_partition_of_every_layer(fmt):
    out = _run("export_to_vllm.py", "llama-3.1-70b", "h100", fmt)
    m = re.search(r"VLLM_PP_LAYER_PARTITION=([\d,]+) vllm serve \S+ --pipeline-parallel-size (\d+)", out)
    assert m, out
    parts = [int(x) for x in m[1].split(",")]
    assert sum(parts) == 80 and len(parts) == int(m[2])     # Llama 3.1 70B has 80 decoder layers


@pytest.mark.parametrize("plan, line", [
    # 47 wafers for Kimi K3 with its EAGLE-3 head + 2 x 4 for Llama 3.1 70B: the sum of the minima
    ("wafer_fleet.yaml", "2 models on wse-3t: 55 devices (bound 55, proven); each alone: 55"),
    # both want the one H200 node (8 GPUs each alone); jointly one takes two H100 nodes
    ("mixed_gpu_fleet.yaml", "2 models on h100-h200: 24 devices (bound 24, proven); each alone: 16"),
])
def test_plan_a_fleet_places_validates_and_exports_each_model(plan, line, tmp_path):
    import json

    out = _run("plan_a_fleet.py", ROOT / "examples" / "fleet_plans" / plan, tmp_path / "f.json")
    assert line in out and "violations: 0" in out
    doc = json.loads((tmp_path / "f.json").read_text())
    assert doc["kind"] == "fleet" and doc["summary"]["proven_optimal"] is True
