"""Every committed mapping in solutions/ validates against the current specs and exports as the runtimes expect."""

from __future__ import annotations

import json
import re
import shlex
import sys

import pytest
from dirs import SOLUTIONS, TOOLS

from placer.export import ExportOptions, ExportRefused, export_mapping
from placer.export.megatron import parse_layout
from placer.export.torch import parse_split_spec
from placer.export.vllm import parse_partition
from placer.mapping import read_mapping
from placer.mapping.validate import validate_mapping
from placer.problem.runtime_rules import runtime_requirements
from placer.specs.catalog import list_models
from placer.specs.model import load_model

sys.path.insert(0, str(TOOLS))
from regenerate_solutions import EXPORTED_TO, MODES, natural_hardware  # noqa: E402

FILES = sorted(SOLUTIONS.glob("*.json"))
needs_files = pytest.mark.skipif(not FILES, reason="solutions/ is empty: run `python tools/regenerate_solutions.py`")


@needs_files
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_committed_mapping_is_valid(path):
    doc = read_mapping(path)
    found = [str(v) for v in validate_mapping(doc, source=str(path))]
    assert found == [], "stale or broken: run `python tools/regenerate_solutions.py --stale` and commit solutions/"
    model, hardware, mode = path.stem.split("__")
    assert (doc["model"]["name"], doc["hardware"]["name"], doc["mode"]) == (model, hardware, mode)
    assert hardware == natural_hardware(model)


CONTIGUOUS = [p for p in FILES if p.stem.endswith("__contiguous")]


# what each runtime cannot run among the catalog's families, and says so (the support table, Megatron's layers)
REFUSED = {
    ("minimax-text-01", "vllm"): "supported until v0.23.0",
    ("minimax-text-01", "sglang"): "has no MiniMaxText01ForCausalLM model class",
    ("jamba-1.5-large", "sglang"): "has no JambaForCausalLM model class",
    ("minimax-text-01", "megatron"): "has no lightning attention layer",
    ("kimi-k3", "megatron"): "has no Kimi Delta Attention (KDA) layer",
    ("kimi-k3-hf", "megatron"): "has no Kimi Delta Attention (KDA) layer",
    ("kimi-linear-48b", "megatron"): "has no Kimi Delta Attention (KDA) layer",
    ("jamba-1.5-large", "megatron"): "has no Mamba-1 layer",
}


def _flags(text: str) -> list[str]:
    return shlex.split("\n".join(x for x in text.splitlines() if not x.startswith("#")).replace("\\\n", " "))


@needs_files
@pytest.mark.parametrize("path", CONTIGUOUS, ids=[p.stem for p in CONTIGUOUS])
def test_contiguous_solution_is_solved_under_the_rules_of_its_runtimes(path):
    """Every contiguous solution records the requirement kinds of every runtime it is exported to,
    and its levels are proven (the rules are constraints of the model, proven like any other)."""
    doc = read_mapping(path)
    model = load_model(doc["model"]["source"])
    assert set(doc.get("require", ())) >= {k for rt in EXPORTED_TO["contiguous"]
                                           for k in runtime_requirements(rt, model)}
    assert doc["summary"]["proven_optimal"] and all(lv["proven"] for lv in doc["summary"]["levels"])
    assert all(any(n.startswith("layers.") for n in st["layers"]) for st in doc["stages"])


@needs_files
@pytest.mark.parametrize("path", CONTIGUOUS, ids=[p.stem for p in CONTIGUOUS])
def test_contiguous_solution_exports_in_every_format(path):
    doc = read_mapping(path)
    name = doc["model"]["name"]
    pp = len(doc["stages"])
    layers = load_model(doc["model"]["source"]).num_hidden_layers
    bare = ExportOptions(bare=True, force=True)
    # vLLM / SGLang: [int(x) for x in s.split(",")], one count per rank, summing to num_hidden_layers
    text = export_mapping(doc, "vllm", options=bare).text
    counts = [int(x) for x in text.split(",")]
    assert len(counts) == pp and sum(counts) == layers and min(counts) >= 1
    assert parse_partition(text, pp, layers) == counts
    assert export_mapping(doc, "sglang", options=bare).text == text
    for fmt in ("vllm", "sglang", "megatron"):
        if (name, fmt) in REFUSED:
            with pytest.raises(ExportRefused, match=re.escape(REFUSED[name, fmt])):
                export_mapping(doc, fmt)
    for fmt, var in (("vllm", "VLLM_PP_LAYER_PARTITION"), ("sglang", "SGLANG_PP_LAYER_PARTITION")):
        if (name, fmt) not in REFUSED:
            words = _flags(export_mapping(doc, fmt).text)
            assert words[0] == f"{var}={text}"
            assert str(doc["summary"]["concurrency_ceiling"]) in words
    # Megatron: the layout reads back as the same counts, never together with a hybrid pattern
    if (name, "megatron") not in REFUSED:
        words = _flags(export_mapping(doc, "megatron").text)
        assert words[words.index("--pipeline-model-parallel-size") + 1] == str(pp)
        assert parse_layout(words[words.index("--pipeline-model-parallel-layout") + 1], pp, layers) == counts
        assert "--hybrid-layer-pattern" not in words and "--hybrid-override-pattern" not in words
    # torch: one split point per stage boundary, at the first layer of each later stage
    spec = json.loads(export_mapping(doc, "torch", options=bare).text)["split_spec"]
    assert parse_split_spec(spec, layers) == counts
    manifest = json.loads(export_mapping(doc, "json").text)
    assert [n["device"] for n in manifest["nodes"]] == doc["route"]


@needs_files
def test_every_catalog_model_has_a_contiguous_solution():
    for spec in list_models():
        hw = natural_hardware(spec.stem)
        assert (SOLUTIONS / f"{spec.stem}__{hw}__contiguous.json").exists(), spec.stem
    assert {p.stem.split("__")[2] for p in FILES} <= set(MODES)


@pytest.mark.slow
def test_regenerate_writes_valid_mappings_and_keeps_current_ones(tmp_path):
    from regenerate_solutions import regenerate

    logged = []
    first = regenerate(tmp_path, models=["llama-3.1-8b"], modes=("contiguous",), time_limit=10, threads=1,
                       log=logged.append)
    path = tmp_path / "llama-3.1-8b__wse-3t__contiguous.json"
    assert first["written"] == [str(path)] and first["invalid"] == []
    assert validate_mapping(read_mapping(path)) == []
    again = regenerate(tmp_path, models=["llama-3.1-8b"], modes=("contiguous",), time_limit=10, threads=1,
                       stale_only=True, log=logged.append)
    assert again["written"] == [] and again["current"] == [str(path)]
    # a mapping that no longer validates is solved again
    doc = read_mapping(path)
    doc["hardware"]["sha256"] = "0" * 64
    path.write_text(json.dumps(doc), encoding="utf-8")
    third = regenerate(tmp_path, models=["llama-3.1-8b"], modes=("contiguous",), time_limit=10, threads=1,
                       stale_only=True, log=logged.append)
    assert third["written"] == [str(path)]
    assert validate_mapping(read_mapping(path)) == []
