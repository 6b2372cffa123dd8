"""Every committed mapping in solutions/ validates against the current specs and exports as the runtimes expect."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from placer.catalog import list_models
from placer.export import export_mapping
from placer.export.megatron import parse_hybrid_pattern, parse_layout
from placer.export.torch import parse_split_spec
from placer.export.vllm import parse_partition
from placer.mapping import read_mapping
from placer.model import load_model
from placer.solutions import MODES, natural_hardware
from placer.validate import validate_mapping

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"
FILES = sorted(SOLUTIONS.glob("*.json"))
needs_files = pytest.mark.skipif(not FILES, reason="solutions/ is empty: run `python -m placer.solutions`")


@needs_files
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_committed_mapping_is_valid(path):
    doc = read_mapping(path)
    found = [str(v) for v in validate_mapping(doc, source=str(path))]
    assert found == [], "stale or broken: run `python -m placer.solutions --stale` and commit solutions/"
    model, hardware, mode = path.stem.split("__")
    assert (doc["model"]["name"], doc["hardware"]["name"], doc["mode"]) == (model, hardware, mode)
    assert hardware == natural_hardware(model)


CONTIGUOUS = [p for p in FILES if p.stem.endswith("__contiguous")]


@needs_files
@pytest.mark.parametrize("path", CONTIGUOUS, ids=[p.stem for p in CONTIGUOUS])
def test_contiguous_solution_exports_in_every_format(path):
    doc = read_mapping(path)
    pp = len(doc["stages"])
    layers = load_model(doc["model"]["source"]).num_hidden_layers
    # vLLM / SGLang: [int(x) for x in s.split(",")], one count per rank, summing to num_hidden_layers
    text = export_mapping(doc, "vllm").text
    counts = [int(x) for x in text.split(",")]
    assert len(counts) == pp and sum(counts) == layers and min(counts) >= 1
    assert parse_partition(text, pp, layers) == counts
    assert export_mapping(doc, "sglang").text == text
    # Megatron: the layout reads back as the same counts; a hybrid pattern too when there is one
    lines = export_mapping(doc, "megatron").text.splitlines()
    assert lines[0] == f"--pipeline-model-parallel-size {pp}"
    assert parse_layout(shlex.split(lines[1])[1], pp, layers) == counts
    if len(lines) > 2:
        assert parse_hybrid_pattern(shlex.split(lines[2])[1], pp) == counts
    # torch: one split point per stage boundary, at the first layer of each later stage
    spec = json.loads(export_mapping(doc, "torch").text)["split_spec"]
    assert parse_split_spec(spec, layers) == counts
    manifest = json.loads(export_mapping(doc, "json").text)
    assert [n["device"] for n in manifest["nodes"]] == doc["route"]


@needs_files
def test_every_catalog_model_has_a_contiguous_solution():
    for spec in list_models():
        hw = natural_hardware(spec.stem)
        assert (SOLUTIONS / f"{spec.stem}__{hw}__contiguous.json").exists(), spec.stem
    assert {p.stem.split("__")[2] for p in FILES} <= set(MODES)


def test_regenerate_writes_valid_mappings_and_keeps_current_ones(tmp_path):
    from placer.solutions import regenerate

    logged = []
    first = regenerate(tmp_path, models=["llama-3.1-8b"], modes=("contiguous",), time_limit=10, workers=1,
                       log=logged.append)
    path = tmp_path / "llama-3.1-8b__wse-3t__contiguous.json"
    assert first["written"] == [str(path)] and first["invalid"] == []
    assert validate_mapping(read_mapping(path)) == []
    again = regenerate(tmp_path, models=["llama-3.1-8b"], modes=("contiguous",), time_limit=10, workers=1,
                       stale_only=True, log=logged.append)
    assert again["written"] == [] and again["current"] == [str(path)]
    # a mapping that no longer validates is solved again
    doc = read_mapping(path)
    doc["hardware"]["sha256"] = "0" * 64
    path.write_text(json.dumps(doc), encoding="utf-8")
    third = regenerate(tmp_path, models=["llama-3.1-8b"], modes=("contiguous",), time_limit=10, workers=1,
                       stale_only=True, log=logged.append)
    assert third["written"] == [str(path)]
    assert validate_mapping(read_mapping(path)) == []
