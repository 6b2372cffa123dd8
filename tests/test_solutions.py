"""Every committed mapping in solutions/ validates against the current specs and exports as the runtimes expect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.catalog import list_models
from placer.export import export_mapping
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


@needs_files
@pytest.mark.parametrize("path", [p for p in FILES if p.stem.endswith("__contiguous")],
                         ids=[p.stem for p in FILES if p.stem.endswith("__contiguous")])
def test_contiguous_solution_exports_a_partition_vllm_accepts(path):
    doc = read_mapping(path)
    text = export_mapping(doc, "vllm").text
    layers = load_model(doc["model"]["source"]).num_hidden_layers
    counts = [int(x) for x in text.split(",")]
    assert len(counts) == len(doc["stages"]) and sum(counts) == layers and min(counts) >= 1
    assert parse_partition(text, len(doc["stages"]), layers) == counts


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
