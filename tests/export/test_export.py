"""Exporters: each output is parsed back with the target runtime's own rules (runtimes.md)."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from mapping_toys import by_hand, spec_mapping, toy_hybrid_spec, toy_instance

from placer import load_fleet, load_model, make_instance, workload_for
from placer.export import ExportOptions, ExportRefused, export_mapping
from placer.export.megatron import (
    layout_string,
    megatron_release,
    parse_hybrid_pattern,
    parse_layout,
    uneven_split_flags,
)
from placer.export.torch import parse_split_spec
from placer.export.vllm import parse_partition
from placer.mapping import build_mapping, write_mapping

BARE = ExportOptions(bare=True)
CONTIGUOUS = [0, 0, 0, 1, 1, 2, 2, 2]      # embedding L0 L1 | L2 L3 | L4 L5 head
FREE = [0, 0, 1, 0, 1, 2, 2, 2]

TOY_FFN = toy_hybrid_spec()

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


# ----------------------------------------------------------------------------- vLLM / SGLang
def command_line(text: str) -> list[str]:
    """The shell words of a launch command (its comment lines dropped)."""
    return shlex.split("\n".join(x for x in text.splitlines() if not x.startswith("#")).replace("\\\n", " "))


def test_vllm_and_sglang_launch_commands_of_the_toy(run_cli, tmp_path, toy):
    path = mapping_file(tmp_path, toy)
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 0 and err.startswith("warning: support not checked")    # the toy names no architecture
    # every rank holds an attention layer: no --block-size; the ceiling 3 and the context 100 from the plan
    assert command_line(out) == ["VLLM_PP_LAYER_PARTITION=2,2,2", "vllm", "serve", "toy-hybrid",
                                 "--pipeline-parallel-size", "3", "--max-num-seqs", "3", "--max-model-len", "100",
                                 "--kv-cache-dtype", "bfloat16", "--mamba-cache-dtype", "bfloat16",
                                 "--mamba-ssm-cache-dtype", "float32"]
    assert vllm_rules("2,2,2", 3, 6) == [2, 2, 2]
    code, out, _ = run_cli(["export", path, "--format", "vllm", "--bare"])
    assert (code, out) == (0, "2,2,2\n")
    code, out, _ = run_cli(["export", path, "--format", "sglang", "--served-model", "org/toy"])
    assert command_line(out) == ["SGLANG_PP_LAYER_PARTITION=2,2,2", "python", "-m", "sglang.launch_server",
                                 "--model-path", "org/toy", "--pp-size", "3", "--max-running-requests", "3",
                                 "--context-length", "100", "--kv-cache-dtype", "bfloat16",
                                 "--mamba-ssm-dtype", "float32"]
    code, out, _ = run_cli(["export", path, "--format", "sglang", "--bare"])
    assert (code, out) == (0, "2,2,2\n")


def test_uneven_partition_and_one_block_size_line(run_cli, tmp_path):
    inst = toy_instance(tmp_path, memory=6000)
    doc = build_mapping(inst, by_hand(inst, [0, 0, 0, 1, 2, 2, 2, 2]))   # L0 L1 | L2 | L3 L4 L5
    path = mapping_file(tmp_path, doc)
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 0
    # stage 1 holds only layers.2, a linear-attention layer: one summary line, not one per rank
    block = [w for w in err.splitlines() if "full-attention" in w]
    assert len(block) == 1 and "1 of 3 ranks hold no full-attention layer (stages 1)" in block[0]
    assert "vllm-project/vllm#51752" in block[0] and "--require attention-per-stage" in block[0]
    # block size by hand: attention page 2 B per token, state page 50 B, 16-token kernel blocks:
    # 16 * ceil(50 / (16 * 2)) = 32 tokens
    words = command_line(out)
    assert words[0] == "VLLM_PP_LAYER_PARTITION=2,1,3" and words[-2:] == ["--block-size", "32"]
    comments = [x for x in out.splitlines() if x.startswith("#")]
    assert sum("--block-size 32" in x for x in comments) == 1
    code, out, _ = run_cli(["export", path, "--format", "vllm", "--bare"])
    assert out == "2,1,3\n"


def test_hybrid_block_size_follows_vllm_alignment():
    from placer.export.vllm import hybrid_block_size
    from placer.specs.workload import Workload

    # kimi-k3 at the committed plan's precisions: MLA latent (512 + 64) x 8 bits = 576 B per token;
    # a KDA layer's state: 64 heads x 128 x 128 at 32 bits + 3 x (3 x 64 x 128) conv values at 16 bits
    model = load_model("kimi-k3")
    wl = Workload(context_tokens=262144, kv_bits=8, state_bits=32, conv_state_bits=16)
    state = 64 * 128 * 128 * 4 + 3 * 3 * 64 * 128 * 2
    assert hybrid_block_size(model, wl) == 128 * -(-state // (128 * 576))


def test_kv_precision_a_runtime_cannot_store_is_refused(tmp_path, toy):
    toy = json.loads(json.dumps(toy))
    doc = spec_mapping(tmp_path, TOY_DENSE.replace("concurrency: 2}", "concurrency: 2, kv_bits: 4}"),
                        [0, 0, 0, 1, 1, 1])
    with pytest.raises(ExportRefused, match="vllm has no --kv-cache-dtype of 4 bits"):
        export_mapping(doc, "vllm")
    assert export_mapping(doc, "vllm", options=ExportOptions(bare=True)).text == "2,2"


def test_a_runtime_that_does_not_run_the_model_is_refused_unless_forced(run_cli, tmp_path):
    from placer.specs.catalog import project_root

    path = project_root() / "solutions" / "minimax-text-01__wse-3t__contiguous.json"
    pp = len(json.loads(path.read_text())["stages"])
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert "vLLM 0.33.0 does not run MiniMaxText01ForCausalLM: it was supported until v0.23.0" in err
    code, out, err = run_cli(["export", path, "--format", "vllm", "--runtime-version", "0.23.0", "--bare"])
    assert code == 0 and out.count(",") == pp - 1
    code, out, err = run_cli(["export", path, "--format", "sglang"])
    assert code == 2 and "SGLang 0.5.23 has no MiniMaxText01ForCausalLM model class" in err
    code, out, err = run_cli(["export", path, "--format", "vllm", "--force"])
    assert code == 0 and "exported anyway: --force" in err
    assert command_line(out)[1:4] == ["vllm", "serve", "minimax-text-01"]


def test_runtime_support_table():
    from placer.export.support import runtime_support

    assert runtime_support("vllm", "0.33.0", "LlamaForCausalLM", 4).runs is True
    assert runtime_support("vllm", "0.33.0", "MiniMaxText01ForCausalLM", 4).runs is False
    assert runtime_support("vllm", "0.23.0", "MiniMaxText01ForCausalLM", 4).runs is None   # not refused
    assert runtime_support("vllm", "0.33.0", "Qwen3_5ForCausalLM", 1).runs is True
    assert "vllm-project/vllm#36640" in runtime_support("vllm", "0.33.0", "Qwen3_5ForCausalLM", 2).reason
    assert runtime_support("sglang", "0.5.23", "JambaForCausalLM", 2).runs is False
    assert runtime_support("sglang", "0.5.23", "KimiLinearForCausalLM", 2).runs is True
    assert runtime_support("vllm", "0.33.0", None, 2).runs is None


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
    assert export_mapping(whole, "vllm", options=BARE).text == "2,2,2"
    cut = build_mapping(inst, by_hand(inst, [1] * 5 + [2] * 4 + [0] * 4 + [3] * 3))
    path = mapping_file(tmp_path, cut)
    code, _, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 2
    assert "cuts 3 layer(s) across devices: layers.1 (stages 0, 1), layers.3 (stages 1, 2), layers.5 (stages 2, 3)" \
        in err
    assert run_cli(["export", path, "--format", "json"])[0] == 0


def test_a_rank_without_decoder_layers_is_refused_by_vllm(tmp_path):
    doc = spec_mapping(tmp_path, TOY_DENSE, [0, 1, 1, 2, 2, 2])   # embedding alone on stage 0
    with pytest.raises(ExportRefused, match=r"stage 0 \(r0w0\) holds no decoder layer \(only the embedding\)"):
        export_mapping(doc, "vllm")
    # Megatron's layout and torch's split points can express it
    assert export_mapping(doc, "megatron", options=BARE).text == "E|t*2|t*2L"
    spec = json.loads(export_mapping(doc, "torch", options=BARE).text)["split_spec"]
    assert spec == {"inner.model.layers.0": "BEGINNING", "inner.model.layers.2": "BEGINNING"}
    assert parse_split_spec(spec, 4) == [0, 2, 2]


def test_invalid_mapping_is_not_exported(run_cli, tmp_path, toy):
    toy["stages"][0]["bytes"]["weights"] += 1
    path = mapping_file(tmp_path, toy)
    code, out, err = run_cli(["export", path, "--format", "vllm"])
    assert code == 2 and out == ""
    assert "1 violation(s) (first: bytes_mismatch: stage 0 (r0w0)" in err


# ----------------------------------------------------------------------------- Megatron
def megatron_words(text: str) -> list[str]:
    return shlex.split("\n".join(x for x in text.splitlines() if not x.startswith("#")).replace("\\\n", " "))


def test_megatron_refuses_the_toys_kda_layers_in_one_line(run_cli, tmp_path, toy):
    # the toy's explicit linear-attention layers are KDA layers, which Megatron cannot build
    code, out, err = run_cli(["export", mapping_file(tmp_path, toy), "--format", "megatron"])
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert "/model: Megatron-LM 0.16.1 has no Kimi Delta Attention (KDA) layer (3 layers: layers.0, ...)" in err


TOY_MAMBA2 = TOY_FFN.replace("{type: mamba, d_state: 4}", "{type: mamba2, d_inner: 32, d_state: 4, num_heads: 2}")


def test_hybrid_pattern_by_release(tmp_path):
    doc = spec_mapping(tmp_path, TOY_MAMBA2, [0, 0, 0, 1, 1, 1])   # embedding M A | M A head
    # 0.16: no '|'; two equal stages of 4 symbols split evenly, --hybrid-override-pattern, no layout
    words = megatron_words(export_mapping(doc, "megatron").text)
    assert words == ["--pipeline-model-parallel-size", "2", "--num-layers", "8", "--hybrid-override-pattern",
                     "ME*-ME*-", "--hidden-size", "16", "--seq-length", "64"]
    # 0.17 and later: '|' between the stages, --hybrid-layer-pattern (which derives --num-layers)
    later = ExportOptions(runtime_version="0.17.0")
    words = megatron_words(export_mapping(doc, "megatron", options=later).text)
    assert words[:4] == ["--pipeline-model-parallel-size", "2", "--hybrid-layer-pattern", "ME*-|ME*-"]
    for text in (export_mapping(doc, "megatron").text, export_mapping(doc, "megatron", options=later).text):
        assert "--pipeline-model-parallel-layout" not in megatron_words(text)   # refused with a hybrid pattern
    assert parse_hybrid_pattern("ME*-|ME*-", 2, megatron_release("0.17.0")) == [4, 4]
    with pytest.raises(ValueError, match=r"'\|' is not one of"):
        parse_hybrid_pattern("ME*-|ME*-", 2, megatron_release("0.16.1"))


def test_hybrid_pattern_uneven_stages_on_0_16(tmp_path):
    doc = spec_mapping(tmp_path, TOY_MAMBA2, [0, 0, 0, 0, 1, 1])   # embedding M A M | A head
    words = megatron_words(export_mapping(doc, "megatron").text)
    # 6 symbols then 2: the first stage count given, the last stage takes the rest
    assert words[:8] == ["--pipeline-model-parallel-size", "2", "--num-layers", "8", "--hybrid-override-pattern",
                         "ME*-ME*-", "--decoder-first-pipeline-num-layers", "6"]


def test_uneven_split_flags_mirror_megatron():
    assert uneven_split_flags([4, 4, 4]) == {}
    assert uneven_split_flags([2, 4, 4]) == {"first": 2}
    assert uneven_split_flags([4, 4, 2]) == {"last": 2}
    assert uneven_split_flags([2, 4, 4, 3]) == {"first": 2, "last": 3}
    assert uneven_split_flags([4, 2, 4, 4]) is None           # a middle stage differs: needs '|'
    assert uneven_split_flags([5]) == {}


def test_gated_deltanet_by_release(tmp_path):
    text = TOY_FFN.replace("{type: mamba, d_state: 4}",
                           "{type: gated_deltanet, num_k_heads: 1, num_v_heads: 2, head_k_dim: 4, head_v_dim: 4}")
    doc = spec_mapping(tmp_path, text, [0, 0, 0, 1, 1, 1])
    words = megatron_words(export_mapping(doc, "megatron").text)
    # 0.16: a GPT model with the Gated DeltaNet attention variant, 1 = linear-attention layer
    assert words[:6] == ["--num-layers", "4", "--pipeline-model-parallel-size", "2",
                         "--pipeline-model-parallel-layout", "Et*2|t*2L"]
    assert words[words.index("--experimental-attention-variant") + 1] == "gated_delta_net"
    assert words[words.index("--linear-attention-freq") + 1] == "[1,0,1,0]"
    assert words[words.index("--moe-layer-freq") + 1] == "[1,0,1,0]"
    # 0.17: the hybrid pattern's G symbol
    words = megatron_words(export_mapping(doc, "megatron", options=ExportOptions(runtime_version="0.17.0")).text)
    assert words[3] == "GE*-|GE*-"


def test_megatron_refuses_layer_kinds_it_has_no_layer_for(tmp_path, run_cli):
    for mixer, words in (("{type: kda, num_heads: 2, head_dim: 4}", "has no Kimi Delta Attention (KDA) layer"),
                         ("{type: lightning, num_heads: 2, head_dim: 4}", "has no lightning attention layer"),
                         ("{type: mamba, d_state: 4}", "has no Mamba-1 layer")):
        doc = spec_mapping(tmp_path, TOY_FFN.replace("{type: mamba, d_state: 4}", mixer), [0, 0, 0, 1, 1, 1])
        with pytest.raises(ExportRefused, match=re.escape(words)):
            export_mapping(doc, "megatron")
    forced = export_mapping(doc, "megatron", options=ExportOptions(force=True, runtime_version="main"))
    assert "ME*-|ME*-" in forced.text and "Mamba-2" in forced.warnings[0]


def test_hybrid_mla_needs_0_19(tmp_path):
    text = TOY_MAMBA2.replace("{type: gqa, num_heads: 2, num_kv_heads: 1}",
                              "{type: mla, num_heads: 2, kv_lora_rank: 4, qk_nope_head_dim: 2, qk_rope_head_dim: 2, "
                              "v_head_dim: 2}")
    doc = spec_mapping(tmp_path, text, [0, 0, 0, 1, 1, 1])
    with pytest.raises(ExportRefused, match=r"no MLA symbol \(\+ arrives in 0.19\)"):
        export_mapping(doc, "megatron", options=ExportOptions(runtime_version="0.18.0"))
    assert export_mapping(doc, "megatron", options=ExportOptions(runtime_version="0.19.0", bare=True)).text \
        == "ME+-|ME+-"


def test_dense_model_gets_a_gpt_layout(tmp_path):
    doc = spec_mapping(tmp_path, TOY_DENSE, [0, 0, 0, 1, 1, 1])
    assert megatron_words(export_mapping(doc, "megatron").text) == [
        "--num-layers", "4", "--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et*2|t*2L",
        "--hidden-size", "8", "--seq-length", "100"]


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
    main = megatron_release("main")
    with pytest.raises(ValueError, match="must be divisible by the pipeline size: 3 segments, pp 2"):
        parse_hybrid_pattern("M*|M*|M*", 2, main)
    with pytest.raises(ValueError, match="'t' is not a valid layer symbol"):
        parse_hybrid_pattern("Mt|M*", 2, main)
    with pytest.raises(ValueError, match="both Attention and MLA"):
        parse_hybrid_pattern("M*+|M*", 2, main)
    with pytest.raises(ValueError, match="'G' is not a valid layer symbol"):
        parse_hybrid_pattern("MG*", 1, megatron_release("0.16.1"))


# ----------------------------------------------------------------------------- torch
def test_torch_split_points(run_cli, tmp_path, toy):
    code, out, _ = run_cli(["export", mapping_file(tmp_path, toy), "--format", "torch", "--bare"])
    assert code == 0
    doc = json.loads(out)
    assert doc["num_stages"] == 3
    assert doc["split_spec"] == {"inner.model.layers.2": "BEGINNING", "inner.model.layers.4": "BEGINNING"}
    assert [s["layer_range"] for s in doc["stages"]] == [[0, 2], [2, 4], [4, 6]]
    assert parse_split_spec(doc["split_spec"], 6) == [2, 2, 2]


def test_torch_split_spec_rules():
    with pytest.raises(ValueError, match="no submodule 'inner.model.layers.9'"):
        parse_split_spec({"inner.model.layers.9": "BEGINNING"}, 6)
    with pytest.raises(ValueError, match="no submodule 'model.layers.2'"):    # the wrapper's prefix is required
        parse_split_spec({"model.layers.2": "BEGINNING"}, 6)
    with pytest.raises(ValueError, match="in module order"):
        parse_split_spec({"inner.model.layers.4": "BEGINNING", "inner.model.layers.2": "BEGINNING"}, 6)
    with pytest.raises(ValueError, match="leaves the first stage empty"):
        parse_split_spec({"inner.model.embed_tokens": "BEGINNING"}, 6)
    assert parse_split_spec({"inner.lm_head": "BEGINNING"}, 6) == [6, 0]


def test_torch_script_compiles_and_names_the_split_points(tmp_path, toy):
    text = export_mapping(toy, "torch", options=ExportOptions(served_model="/models/toy")).text
    compile(text, "pipeline.py", "exec")
    assert "MODEL = '/models/toy'" in text and "NUM_STAGES = 3" in text
    assert "'inner.model.layers.2': SplitPoint.BEGINNING," in text
    assert "'inner.model.layers.4': SplitPoint.BEGINNING," in text
    assert "torchrun --nproc-per-node 3" in text


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
    code, out, _ = run_cli(["export", path, "--format", "vllm", "--bare", "-o", tmp_path / "p.txt"])
    assert code == 0 and out == ""
    assert (tmp_path / "p.txt").read_text() == "2,2,2\n"


# ----------------------------------------------------------------------------- a catalog model
def test_kimi_k3_one_layer_per_wafer():
    model = load_model("kimi-k3")
    inst = make_instance(model, load_fleet("wse-3t"), workload_for(model))
    doc = build_mapping(inst, by_hand(inst, list(range(93))))
    out = export_mapping(doc, "vllm")
    assert vllm_rules(command_line(out.text)[0].split("=")[1], 93, 93) == [1] * 93
    # 69 of the 93 ranks hold a KDA layer only: one line says so
    assert [w for w in out.warnings if "69 of 93 ranks hold no full-attention layer" in w] != []
    assert len(out.warnings) == 2       # that line and the support note (kimi-k3 names no runtime class)
    # Megatron has no KDA layer: refused, naming it
    with pytest.raises(ExportRefused, match=r"has no Kimi Delta Attention \(KDA\) layer \(69 layers"):
        export_mapping(doc, "megatron")
