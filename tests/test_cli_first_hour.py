"""A newcomer's first hour through the command line: each test is a path a new user took (README and
``--help`` only) that cost time or gave a wrong answer, run end to end with the values checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "hf_corpus"


@pytest.fixture
def qwen_config(tmp_path):
    """Qwen3.5-27B's config.json (a vision tower in front of 64 decoder layers), under the name a
    download tool gives it."""
    path = tmp_path / "Qwen--Qwen3.5-27B_config.json"
    shutil.copy(FIXTURES / "Qwen--Qwen3.5-27B.json", path)
    return path


# ----------------------------------------------------------------------------- 1: --text-only plans
def test_text_only_plan_exports_validates_and_rebuilds(run_cli, qwen_config, tmp_path):
    q = tmp_path / "q.json"
    code, _, err = run_cli(["solve", qwen_config, "-H", "h100", "--text-only", "--racks", "1", "--tp", "2",
                            "--context", "32k", "--concurrency", "8", "--time-limit", "10", "-q", "-o", q])
    assert code == 0, err
    doc = json.loads(q.read_text())
    assert doc["model"]["dropped"] == ["vision_tower"]
    assert "vision_tower" not in doc["route"] and len(doc["route"]) == 66      # embedding, 64 layers, head
    assert doc["parallel"]["tp"] == 2                    # the tower no longer blocks tensor parallelism
    code, out, err = run_cli(["validate", q])
    assert code == 0, out + err
    code, out, err = run_cli(["export", q, "--format", "vllm", "--bare"])
    assert code == 0, err
    counts = [int(c) for c in out.strip().split(",")]
    assert sum(counts) == 64 and len(counts) == len(doc["stages"])
    fixed = tmp_path / "fixed.json"
    code, out, err = run_cli(["validate", q, "--rebuild", "-o", fixed])
    assert code == 0, out + err
    assert json.loads(fixed.read_text())["model"]["dropped"] == ["vision_tower"]


def test_import_hf_text_only_leaves_the_tower_out(run_cli, qwen_config, tmp_path):
    spec = tmp_path / "q.yaml"
    code, _, err = run_cli(["import-hf", qwen_config, "--text-only", "-o", spec])
    assert code == 0, err
    text = spec.read_text()
    assert "vision_tower" not in text.split("\nname:", 1)[1]
    assert "vision/audio tower (460,730,096 parameters) left out (--text-only)" in text
    code, out, _ = run_cli(["inspect", spec, "--json"])
    names = [x["name"] for x in json.loads(out)["layers"]]
    assert names[0] == "embedding" and len(names) == 66
    code, out, _ = run_cli(["inspect", qwen_config, "--json"])
    full = json.loads(out)
    assert full["layers"][0]["name"] == "vision_tower"
    # the text spec is the full one less the tower, parameter for parameter
    code, out2, _ = run_cli(["inspect", spec, "--json"])
    assert json.loads(out2)["totals"]["params"] == full["totals"]["params"] - 460_730_096
