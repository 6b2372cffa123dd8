"""Exporters: each output is parsed back with the target runtime's own rules (runtimes.md)."""

from __future__ import annotations

import json
import re

import pytest
from mapping_toys import by_hand, toy_instance

from placer import load_fleet, load_model, make_instance, workload_for
from placer.export import ExportRefused, export_mapping
from placer.export.megatron import layout_string, parse_hybrid_pattern, parse_layout
from placer.export.torch import parse_split_spec
from placer.export.vllm import parse_partition
from placer.mapping import build_mapping, write_mapping

CONTIGUOUS = [0, 0, 0, 1, 1, 2, 2, 2]      # embedding L0 L1 | L2 L3 | L4 L5 head
FREE = [0, 0, 1, 0, 1, 2, 2, 2]

TOY_FFN = """\
name: toy-ffn
hidden_size: 16
vocab_size: 32
num_layers: 4
pattern: "(MA)*2"
mixers:
  mam: {type: mamba, d_state: 4}
  att: {type: gqa, num_heads: 2, num_kv_heads: 1}
ffns:
  mlp: {type: dense, intermediate_size: 32}
  moe: {type: moe, num_experts: 4, experts_per_token: 2, moe_intermediate_size: 8}
layer_types:
  M: {mixer: mam, ffn: moe}
  A: {mixer: att, ffn: mlp}
default_workload: {context: 64, concurrency: 1}
"""

TOY_DENSE = """\
name: toy-dense
hidden_size: 8
vocab_size: 10
layers:
  - {kind: attention, weight_bytes: 1000, kv_bytes_per_token: 2}
  - {kind: attention, weight_bytes: 1000, kv_bytes_per_token: 2}
  - {kind: attention, weight_bytes: 1000, kv_bytes_per_token: 2}
  - {kind: attention, weight_bytes: 1000, kv_bytes_per_token: 2}
default_workload: {context: 100, concurrency: 2}
"""


def vllm_rules(text: str, pp_size: int, num_hidden_layers: int) -> list[int]:
    """vLLM's get_pp_indices checks, written out here as runtimes.md states them."""
    partitions = [int(x) for x in text.split(",")]
    assert len(partitions) == pp_size
    assert sum(partitions) == num_hidden_layers
    assert all(p >= 1 for p in partitions)
    return partitions


def mapping_file(tmp_path, doc, name="m.json"):
    path = tmp_path / name
    write_mapping(path, doc)
    return path


@pytest.fixture
def toy(tmp_path):
    inst = toy_instance(tmp_path)
    return build_mapping(inst, by_hand(inst, CONTIGUOUS))


def _spec_mapping(tmp_path, text, assignment, memory=10**9):
    (tmp_path / "spec.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "hw.yaml").write_text(
        f"name: big\ndevice: {{kind: wafer, memory: {memory}}}\nfleet: {{racks: 1, per_rack: 4}}\n", encoding="utf-8")
    model = load_model(tmp_path / "spec.yaml")
    inst = make_instance(model, load_fleet(tmp_path / "hw.yaml"), workload_for(model))
    return build_mapping(inst, by_hand(inst, assignment))


# ----------------------------------------------------------------------------- vLLM / SGLang
def test_vllm_partition_of_the_toy(run_cli, tmp_path, toy):
    path = mapping_file(tmp_path, toy)
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert (code, out, err) == (0, "2,2,2\n", "")
    assert vllm_rules(out.strip(), 3, 6) == [2, 2, 2]
    code, out, _ = run_cli(["export", path, "--format", "sglang"])
    assert (code, out) == (0, "2,2,2\n")


def test_uneven_partition_and_the_no_attention_warning(run_cli, tmp_path):
    inst = toy_instance(tmp_path, memory=6000)
    doc = build_mapping(inst, by_hand(inst, [0, 0, 0, 1, 2, 2, 2, 2]))   # L0 L1 | L2 | L3 L4 L5
    path = mapping_file(tmp_path, doc)
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 0 and out == "2,1,3\n"
    assert vllm_rules(out.strip(), 3, 6) == [2, 1, 3]
    # stage 1 holds only layers.2, a linear-attention layer
    assert err.count("warning:") == 1
    assert "stage 1 (r0w1) holds no full-attention layer" in err and "vllm-project/vllm#51752" in err


def test_parse_partition_raises_as_vllm_does():
    assert parse_partition("20, 21,21", 3, 62) == [20, 21, 21]   # int() strips spaces
    with pytest.raises(ValueError, match=re.escape("Invalid partition string: 20,,42")):
        parse_partition("20,,42", 3, 62)
    with pytest.raises(ValueError, match=re.escape("len(partitions)=2 does not match pp_size=3.")):
        parse_partition("31,31", 3, 62)
    with pytest.raises(ValueError, match=re.escape("sum(partitions)=61 does not match num_hidden_layers=62.")):
        parse_partition("20,20,21", 3, 62)


def test_free_mapping_is_refused_except_as_a_manifest(run_cli, tmp_path):
    inst = toy_instance(tmp_path, mode="free")
    path = mapping_file(tmp_path, build_mapping(inst, by_hand(inst, FREE)))
    for fmt in ("vllm", "sglang", "megatron", "torch"):
        code, out, err = run_cli(["export", path, "--format", fmt])
        assert code == 2 and out == ""
        assert "a free mapping revisits devices and cannot be exported" in err
    code, out, _ = run_cli(["export", path, "--format", "json"])
    assert code == 0
    manifest = json.loads(out)
    assert [n["device"] for n in manifest["nodes"]] == ["r0w0", "r0w0", "r0w1", "r0w0", "r0w1"] + ["r0w2"] * 3


def test_split_with_whole_layers_exports_and_cut_layers_are_refused(run_cli, tmp_path):
    inst = toy_instance(tmp_path, mode="split", granularity="shards:2")
    whole = build_mapping(inst, by_hand(inst, [0] * 6 + [1] * 4 + [2] * 6))
    assert export_mapping(whole, "vllm").text == "2,2,2"
    cut = build_mapping(inst, by_hand(inst, [1] * 5 + [2] * 4 + [0] * 4 + [3] * 3))
    path = mapping_file(tmp_path, cut)
    code, _, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 2
    assert "cuts 3 layer(s) across devices: layers.1 (stages 0, 1), layers.3 (stages 1, 2), layers.5 (stages 2, 3)" \
        in err
    assert run_cli(["export", path, "--format", "json"])[0] == 0


def test_a_rank_without_decoder_layers_is_refused_by_vllm(tmp_path):
    doc = _spec_mapping(tmp_path, TOY_DENSE, [0, 1, 1, 2, 2, 2])   # embedding alone on stage 0
    with pytest.raises(ExportRefused, match=r"stage 0 \(r0w0\) holds no decoder layer \(only the embedding\)"):
        export_mapping(doc, "vllm")
    # Megatron's layout and torch's split points can express it
    assert export_mapping(doc, "megatron").text.splitlines()[1] == "--pipeline-model-parallel-layout 'E|t*2|t*2L'"
    spec = json.loads(export_mapping(doc, "torch").text)["split_spec"]
    assert spec == {"model.layers.0": "BEGINNING", "model.layers.2": "BEGINNING"}
    assert parse_split_spec(spec, 4) == [0, 2, 2]


def test_invalid_mapping_is_not_exported(run_cli, tmp_path, toy):
    toy["stages"][0]["bytes"]["weights"] += 1
    path = mapping_file(tmp_path, toy)
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 2 and out == ""
    assert "1 violation(s) (first: bytes_mismatch: stage 0 (r0w0)" in err


# ----------------------------------------------------------------------------- Megatron
def test_megatron_layout_and_hybrid_pattern_of_the_toy(run_cli, tmp_path, toy):
    code, out, err = run_cli(["export", mapping_file(tmp_path, toy), "--format", "megatron"])
    assert code == 0
    assert out.splitlines() == ["--pipeline-model-parallel-size 3",
                                "--pipeline-model-parallel-layout 'Et*2|t*2|t*2L'",
                                "--hybrid-layer-pattern 'M*|M*|M*'"]
    assert parse_layout("Et*2|t*2|t*2L", 3, 6) == [2, 2, 2]
    assert parse_hybrid_pattern("M*|M*|M*", 3) == [2, 2, 2]
    assert "6 symbols" in err


def test_hybrid_pattern_has_one_symbol_per_mixer_and_per_ffn(tmp_path):
    doc = _spec_mapping(tmp_path, TOY_FFN, [0, 0, 0, 1, 1, 1])   # embedding M A | M A head
    lines = export_mapping(doc, "megatron").text.splitlines()
    assert lines[1] == "--pipeline-model-parallel-layout 'Et*2|t*2L'"
    assert lines[2] == "--hybrid-layer-pattern 'ME*-|ME*-'"
    assert parse_hybrid_pattern("ME*-|ME*-", 2) == [2, 2]


def test_dense_model_gets_no_hybrid_pattern(tmp_path):
    doc = _spec_mapping(tmp_path, TOY_DENSE, [0, 0, 0, 1, 1, 1])
    assert export_mapping(doc, "megatron").text.splitlines() == [
        "--pipeline-model-parallel-size 2", "--pipeline-model-parallel-layout 'Et*2|t*2L'"]


@pytest.mark.parametrize("layout, pp, layers, counts", [
    ("Et*3|(tt|)*29,m|L", 16, 61, [3] + [2] * 29 + [0, 0]),      # runtimes.md examples
    ("Et|(tt|)*30L", 16, 61, [1] + [2] * 30 + [0]),
    ("Et*11|t*11|t*11|t*10mL", 4, 43, [11, 11, 11, 10]),
    ("Et*23|t*24|t*24|t*23L", 4, 94, [23, 24, 24, 23]),
])
def test_parse_layout_reads_the_documented_examples(layout, pp, layers, counts):
    assert parse_layout(layout, pp, layers) == counts


@pytest.mark.parametrize("layout, pp, layers, words", [
    ("t*3|Et*2L", 2, 5, "first layer must be embedding"),
    ("Et*2|t*2", 2, 4, "last layer must be loss"),
    ("Et*2|tt|t*2L", 2, 6, "must be divisible by pipeline_model_parallel_size"),
    ("Et*2|t*2L", 2, 5, "must match num_layers 5"),
    ("Ex|L", 2, 0, "Invalid layer character: x"),
    ("EEt|tL", 2, 2, "exactly once"),
])
def test_parse_layout_refuses_what_megatron_refuses(layout, pp, layers, words):
    with pytest.raises(ValueError, match=words):
        parse_layout(layout, pp, layers)


def test_layout_string_form():
    assert layout_string([23, 24, 24, 23]) == "Et*23|t*24|t*24|t*23L"
    assert layout_string([1, 0, 5]) == "Et||t*5L"
    assert layout_string([4]) == "Et*4L"


def test_hybrid_pattern_rules():
    with pytest.raises(ValueError, match="3 pipeline stages, expected 2"):
        parse_hybrid_pattern("M*|M*|M*", 2)
    with pytest.raises(ValueError, match="'t' is not a valid layer symbol"):
        parse_hybrid_pattern("Mt|M*", 2)
    with pytest.raises(ValueError, match="empty"):
        parse_hybrid_pattern("M*||M*", 3)


# ----------------------------------------------------------------------------- torch
def test_torch_split_points(run_cli, tmp_path, toy):
    code, out, _ = run_cli(["export", mapping_file(tmp_path, toy), "--format", "torch"])
    assert code == 0
    doc = json.loads(out)
    assert doc["num_stages"] == 3
    assert doc["split_spec"] == {"model.layers.2": "BEGINNING", "model.layers.4": "BEGINNING"}
    assert [s["layer_range"] for s in doc["stages"]] == [[0, 2], [2, 4], [4, 6]]
    assert parse_split_spec(doc["split_spec"], 6) == [2, 2, 2]


def test_torch_split_spec_rules():
    with pytest.raises(ValueError, match="no submodule 'model.layers.9'"):
        parse_split_spec({"model.layers.9": "BEGINNING"}, 6)
    with pytest.raises(ValueError, match="in module order"):
        parse_split_spec({"model.layers.4": "BEGINNING", "model.layers.2": "BEGINNING"}, 6)
    with pytest.raises(ValueError, match="leaves the first stage empty"):
        parse_split_spec({"model.embed_tokens": "BEGINNING"}, 6)
    assert parse_split_spec({"lm_head": "BEGINNING"}, 6) == [6, 0]


# ----------------------------------------------------------------------------- manifest
def test_manifest_lists_nodes_stages_and_workload(tmp_path, toy):
    m = json.loads(export_mapping(toy, "json").text)
    assert m["manifest_version"] == 1
    assert m["model"]["num_hidden_layers"] == 6 and m["model"]["num_nodes"] == 8
    assert [n["kind"] for n in m["nodes"]] == ["embedding"] + ["linear_attention", "attention"] * 3 + ["lm_head"]
    assert [n["stage"] for n in m["nodes"]] == CONTIGUOUS
    assert m["stages"][0]["kinds"] == {"embedding": 1, "linear_attention": 1, "attention": 1}
    assert m["stages"][2]["nodes"] == ["layers.4", "layers.5", "lm_head"]
    assert m["workload"] == toy["workload"]
    assert m["edges"] == [[i, i + 1] for i in range(7)]
    assert m["concurrency_ceiling"] == 3


def test_export_to_a_file(run_cli, tmp_path, toy):
    path = mapping_file(tmp_path, toy)
    code, out, _ = run_cli(["export", path, "--format", "vllm", "-o", tmp_path / "p.txt"])
    assert code == 0 and out == ""
    assert (tmp_path / "p.txt").read_text() == "2,2,2\n"


# ----------------------------------------------------------------------------- a catalog model
def test_kimi_k3_one_layer_per_wafer():
    model = load_model("kimi-k3")
    inst = make_instance(model, load_fleet("wse-3t"), workload_for(model))
    doc = build_mapping(inst, by_hand(inst, list(range(93))))
    out = export_mapping(doc, "vllm")
    assert vllm_rules(out.text, 93, 93) == [1] * 93
    # 69 of the 93 ranks hold a KDA layer only
    assert len(out.warnings) == 69
    mega = export_mapping(doc, "megatron").text.splitlines()
    pattern = mega[2].split(" ", 1)[1].strip("'")
    assert parse_hybrid_pattern(pattern, 93) == [1] * 93
    assert pattern.replace("|", "") == "MMM*" * 23 + "*"
