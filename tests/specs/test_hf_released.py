"""Released config families the importer used to refuse or miscount (tests/fixtures/hf_released,
see its README.md for where each file comes from), snapshot directories, and the warnings an
import gives when a checkpoint says it is quantized but no stored format can be read.

Parameter totals are checked against transformers' meta-device count (``tests/hf_oracle.py``)
where the installed transformers builds the family; stored bytes of one layer by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import hf_oracle
import pytest
from dirs import FIXTURES

from placer.problem import memory
from placer.specs.model import load_model
from placer.specs.workload import Workload, workload_for

RELEASED = FIXTURES / "hf_released"
CORPUS = FIXTURES / "hf_corpus"
TEXT = ("embedding", "attention", "linear_attention", "ffn", "lm_head")
STEMS = ["Qwen3.6-35B-A3B-NVFP4", "Nemotron-3.5-30B-A3B-NVFP4", "GLM-5.2-NVFP4", "DeepSeek-V4-Flash-FP8",
         "MiniMax-M3-NVFP4", "Step-3.7-Flash"]
TOLERANCE = 5e-3  # 0.5%


def _nvfp4(rows: int, cols: int, tensor_bits: int) -> int:
    """One NVFP4 tensor: 4-bit weights, an fp8 scale per 16 of a row, ``tensor_bits`` of fp32 scales."""
    return rows * cols // 2 + rows * (cols // 16) + tensor_bits // 8


def _fp8(rows: int, cols: int) -> int:
    """One ModelOpt FP8 tensor: e4m3 weights, fp32 weight and input scales."""
    return rows * cols + 8


def test_every_released_fixture_is_listed_in_the_readme():
    listed = (RELEASED / "README.md").read_text()
    for p in RELEASED.glob("*.json"):
        assert f"`{p.name}`" in listed, p.name


@pytest.mark.hf
@pytest.mark.parametrize("stem", STEMS)
def test_released_family_matches_transformers(stem):
    """Within 0.5% of transformers' count of the text model (0 here: exact), and the wrapper's
    count with its tower; the decoder has the layers transformers builds (no MTP layer among them)."""
    pytest.importorskip("transformers")
    model = load_model(RELEASED / f"{stem}.json")
    oracle = hf_oracle.count_file(RELEASED / f"{stem}.json")
    assert oracle["status"] == "built", oracle
    towers = sum(x.params for x in model.layers if x.kind not in TEXT)
    text = model.total_params - towers
    assert abs(text - oracle["total"]) <= TOLERANCE * oracle["total"], (text, oracle["total"])
    assert model.num_hidden_layers == oracle["num_hidden_layers"]
    if towers:
        assert abs(model.total_params - oracle["full_total"]) <= TOLERANCE * oracle["full_total"]


@pytest.mark.hf
def test_step_3_7_mtp_entries_are_not_decoder_layers():
    """Its per-layer lists carry the 3 MTP layers after the 45 decoder layers, as legacy hub configs do
    (Step-3.7's family is read from transformers' module tree: the hf extra)."""
    cfg = json.loads((RELEASED / "Step-3.7-Flash.json").read_text())["text_config"]
    assert len(cfg["layer_types"]) == 48 and cfg["num_hidden_layers"] == 45
    assert load_model(RELEASED / "Step-3.7-Flash.json").num_hidden_layers == 45


def test_modelopt_mixed_precision_layer_by_hand():
    """Qwen3.6's MIXED_PRECISION table: routed and shared experts W4A16_NVFP4 (4-bit, fp8 scale per
    16, one fp32 global scale), attention projections FP8 (fp32 weight and input scales), router,
    the GDN's b / a projections, convolution and norms bf16."""
    m = load_model(RELEASED / "Qwen3.6-35B-A3B-NVFP4.json", text_only=True)
    layer = next(x for x in m.layers if x.name == "layers.3")          # full attention, MoE
    assert layer.mixer == "gqa"
    h, nq, nkv, d, e, i = 2048, 16, 2, 256, 256, 512
    attention = _fp8(2 * nq * d, h) + 2 * _fp8(nkv * d, h) + _fp8(h, nq * d) + 2 * 2 * d   # + q/k norms
    experts = e * (2 * _nvfp4(i, h, 32) + _nvfp4(h, i, 32))
    shared = 2 * _nvfp4(i, h, 32) + _nvfp4(h, i, 32)
    bf16 = 2 * (e * h + h + 2 * h)                                    # router, shared-expert gate, norms
    assert memory.weight_bytes(layer, workload_for(m)) == attention + experts + shared + bf16


def test_modelopt_weight_only_nvfp4_layer_by_hand():
    """Nemotron NVFP4 with ``quant_algo: W4A16_NVFP4``: every linear weight 4-bit with its scales
    and one fp32 global scale (no input scale); the Mamba-2 mixer's convolution and norms bf16."""
    m = load_model(RELEASED / "Nemotron-3.5-30B-A3B-NVFP4.json")
    layer = next(x for x in m.layers if x.name == "layers.1")          # an MoE sub-block
    assert layer.ffn == "moe" and layer.mixer is None
    d = dict(layer.ffn_dims)
    h, e, i = m.hidden_size, d["num_experts"], d["moe_intermediate_size"]
    shared = d["num_shared_experts"] * (d.get("shared_intermediate_size") or i)
    experts = e * (_nvfp4(i, h, 32) + _nvfp4(h, i, 32))               # up and down (relu^2, no gate)
    bf16 = 2 * (e * h + h)                                            # router (its bias is a buffer), the norm
    assert memory.weight_bytes(layer, workload_for(m)) == experts + _nvfp4(shared, h, 32) + _nvfp4(h, shared, 32) + bf16


def test_glm_5_2_sparse_attention_layers_are_mla_with_the_indexer():
    m = load_model(RELEASED / "GLM-5.2-NVFP4.json")
    decoder = [x for x in m.layers if x.index is not None]
    assert len(decoder) == 78 and all(dict(x.mixer_dims).get("index_head_dim") == 128 for x in decoder)


# ----------------------------------------------------------------------------- snapshots
def _snapshot(tmp_path: Path, stem: str, quant_name: str | None = "hf_quant_config.json") -> Path:
    snap = tmp_path / "snap"
    snap.mkdir()
    shutil.copyfile(CORPUS / f"{stem}.json", snap / "config.json")
    if quant_name:
        shutil.copyfile(CORPUS / f"{stem}.hf_quant_config.json", snap / quant_name)
    return snap


def test_a_snapshot_directory_is_a_model(tmp_path, run_cli):
    snap = _snapshot(tmp_path, "nvidia--Qwen3-235B-A22B-NVFP4")
    from_dir = load_model(snap)
    beside = load_model(CORPUS / "nvidia--Qwen3-235B-A22B-NVFP4.json")
    wl = Workload()
    assert sum(memory.weight_bytes(x, wl) for x in from_dir.layers) == \
        sum(memory.weight_bytes(x, wl) for x in beside.layers)
    code, out, err = run_cli(["inspect", snap])
    assert code == 0, err
    assert "weights as stored" in out


def test_a_snapshot_without_config_json_is_refused(tmp_path, run_cli):
    code, out, err = run_cli(["inspect", tmp_path])
    assert code == 2 and not out
    assert err.startswith(f"error: {tmp_path}: config.json: a Hugging Face snapshot directory holds a config.json")


def test_a_quantization_file_under_another_name_is_read_and_said(tmp_path):
    snap = _snapshot(tmp_path, "nvidia--Qwen3-235B-A22B-NVFP4", "quant_config_nvfp4.json")
    m = load_model(snap)
    assert {g.format for x in m.layers for g in x.weight_groups} == {"bf16", "nvfp4-g16"}
    assert any("quantization read from quant_config_nvfp4.json" in n for n in m.notes)
    shutil.copyfile(snap / "quant_config_nvfp4.json", snap / "hf_quant_config_old.json")
    two = load_model(snap)
    assert not any(x.weight_groups for x in two.layers)
    assert any("several quantization files" in n and n.startswith("warning: ") for n in two.notes)


def test_a_quantized_name_without_a_format_warns(tmp_path, run_cli):
    """The config alone (its sibling missing) of an NVFP4 release: weights count at 16 bits, and the
    command says why."""
    snap = tmp_path / "Qwen3-235B-A22B-NVFP4"
    snap.mkdir()
    shutil.copyfile(CORPUS / "nvidia--Qwen3-235B-A22B-NVFP4.json", snap / "config.json")
    code, _, err = run_cli(["inspect", snap])
    assert code == 0
    assert "warning: Qwen3-235B-A22B-NVFP4: the config says the checkpoint is quantized (its name says NVFP4)" in err


def test_the_safetensors_index_decides_which_modules_are_quantized(tmp_path):
    """The index stores layer 0's o_proj without scales (kept in bf16 by the export) though the
    exclude list does not name it: the index wins; layers it does not name follow the config."""
    snap = _snapshot(tmp_path, "nvidia--Qwen3-235B-A22B-NVFP4")
    weights = {}
    for proj in ("q_proj", "k_proj", "v_proj"):
        for leaf in ("weight", "weight_scale", "weight_scale_2", "input_scale"):
            weights[f"model.layers.0.self_attn.{proj}.{leaf}"] = "model-00001.safetensors"
    weights["model.layers.0.self_attn.o_proj.weight"] = "model-00001.safetensors"
    (snap / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weights}))
    m = load_model(snap)
    first, second = m.layers[1], m.layers[2]
    h = m.hidden_size
    o_bf16 = next(g for g in first.weight_groups if g.role == "mixer" and g.format == "bf16")
    assert "self_attn.o_proj.weight" in o_bf16.tensors and o_bf16.params == h * 64 * 128 + 2 * 128
    assert not any("self_attn.o_proj.weight" in g.tensors and g.format == "bf16" for g in second.weight_groups)


@pytest.mark.hf
def test_meta_path_quantized_checkpoint_warns():
    """DeepSeek-V4 FP8 through transformers' module tree: the count is exact, the formats are not read."""
    m = load_model(RELEASED / "DeepSeek-V4-Flash-FP8.json")
    assert any(n.startswith("warning: the checkpoint is quantized (quantization_config) but the meta-device path")
               for n in m.notes)


# ----------------------------------------------------------------------------- the workload line
@pytest.mark.parametrize("command", [["inspect"], ["solve", "-H", "h100", "--racks", "1", "--tp", "2",
                                                "--time-limit", "5", "-q"]])
def test_workload_line_says_weights_as_stored(command, run_cli):
    """Item 5 of issue 21: a checkpoint read at its stored formats is not described as 16-bit."""
    model = CORPUS / "nvidia--MiniMax-M2.5-NVFP4.json"
    code, out, err = run_cli([command[0], model, *command[1:], "--context", "8k"])
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("workload:"))
    assert "weights as stored (bf16, nvfp4-g16)" in line and "weights 16-bit" not in line
    code, out, _ = run_cli([command[0], model, *command[1:], "--context", "8k", "--weight-bits", "8"])
    assert "weights 8-bit" in next(x for x in out.splitlines() if x.startswith("workload:"))


@pytest.mark.slow
def test_a_large_index_is_read_and_a_broken_one_is_said(tmp_path):
    """An index beyond a spec file's 8 MiB (Qwen3-235B's experts alone: 144,000 tensors) is read; an unreadable
    one is named in a warning and the configs alone decide."""
    snap = _snapshot(tmp_path, "nvidia--Qwen3-235B-A22B-NVFP4")
    weights = {f"model.layers.{i}.mlp.experts.{e}.{p}.{leaf}": "model-00001-of-00099.safetensors"
               for i in range(94) for e in range(128) for p in ("gate_proj", "up_proj", "down_proj")
               for leaf in ("weight", "weight_scale", "weight_scale_2", "input_scale")}
    weights["model.layers.0.self_attn.o_proj.weight"] = "model-00001-of-00099.safetensors"
    text = json.dumps({"metadata": {}, "weight_map": weights})
    assert len(text) > 8 * 2**20
    (snap / "model.safetensors.index.json").write_text(text)
    m = load_model(snap)
    assert any("self_attn.o_proj.weight" in g.tensors and g.format == "bf16" for g in m.layers[1].weight_groups)
    (snap / "model.safetensors.index.json").write_text("{")
    broken = load_model(snap)
    assert any(n.startswith("warning: model.safetensors.index.json not read (JSONDecodeError)") for n in broken.notes)
