"""The validator's own per-rank rules (placer.mapping.ranks): hand values, agreement with the
solver's (placer.problem.parallel) on every catalog model at several degrees, tampered mappings caught,
and the intra-group links in the hop latency."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
from dirs import FIXTURES, ROOT

from placer.mapping import ranks as V
from placer.mapping.validate import validate_mapping
from placer.planning import Requirements, SolverSettings, build_instance, place_instance
from placer.problem import parallel as P
from placer.problem import slices
from placer.specs.catalog import list_models
from placer.specs.fleet import fleet_from_dict, load_fleet
from placer.specs.model import load_model, model_from_dict
from placer.specs.workload import Workload, workload_for

PLACER = ROOT / "placer"


def _layer(m, name):
    return next(x for x in m.layers if x.name == name)


# ----------------------------------------------------------------------------- by hand
def test_llama_70b_by_hand():
    m = load_model("llama-3.1-70b")
    x, h = _layer(m, "layers.0"), 8192
    # TP 16 > 8 KV heads: q 8192*4*128, k+v one whole head each, o 4*128*8192, MLP 3*8192*1792, norms
    assert V.rank_params(x, h, 16) == 4_194_304 + 2 * 8192 * 128 + 4_194_304 + 3 * 8192 * 1792 + 2 * 8192
    assert V.rank_kv_elements(x, h, 16) == 2 * 128                       # replicated, not halved
    assert V.rank_kv_elements(x, h, 2) == 2 * 4 * 128
    assert V.rank_params(_layer(m, "lm_head"), h, 8) == 16_032 * 8192 + 8192


def test_deepseek_v3_tp8_by_hand():
    m = load_model("deepseek-v3")
    x, h = _layer(m, "layers.3"), 7168                       # an MoE layer: 256 experts of 2048, 1 shared
    mla = 7168 * 1536 + 1536 + 1536 * 16 * 192 + 7168 * 576 + 512 + 512 * 16 * 256 + 16 * 128 * 7168
    router = 256 * 7168 + 256
    shared = 3 * 7168 * 2048 // 8
    split = 256 * 3 * 7168 * 256                             # every expert at 2048 / 8
    whole = 32 * 3 * 7168 * 2048                             # EP 8: 32 whole experts per rank
    assert V.rank_params(x, h, 8) == mla + router + shared + split + 2 * h
    assert V.rank_params(x, h, 8, ep=True) == mla + router + shared + whole + 2 * h
    assert V.rank_kv_elements(x, h, 8) == 576                # the latent whole on each rank


def test_qwen3_next_tp4_state_by_hand():
    m = load_model("qwen3-next-80b")
    gdn, h = _layer(m, "layers.0"), 2048
    assert V.rank_state_elements(gdn, h, 4) == (8 * 128 * 128, 3 * (2 * 4 * 128 + 8 * 128))
    assert V.rank_refusal(gdn, h, 3) == "key heads 16 is not a multiple of the degree 3"


# tensors the catalog models do not all exercise: output gates, full-width q/k norms, an MLA
# output gate with a DSA indexer, ungated MLPs and experts, Mamba-2 with projection biases
FEATURES = dict(
    name="features", hidden_size=64, vocab_size=512, num_layers=4, pattern="ABCD",
    mixers={"g": {"type": "gqa", "num_heads": 8, "num_kv_heads": 2, "head_dim": 16, "output_gate": True,
                  "qk_norm": "full", "qkv_bias": True, "o_bias": True, "sinks": True},
            "m": {"type": "mla", "num_heads": 8, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
                  "qk_rope_head_dim": 4, "v_head_dim": 8, "output_gate": True, "index_head_dim": 8,
                  "index_num_heads": 4},
            "s": {"type": "mamba2", "num_heads": 8, "d_inner": 128, "d_state": 16, "n_groups": 1,
                  "proj_bias": True, "conv_bias": False},
            "k": {"type": "kda", "num_heads": 8, "head_dim": 8, "full_rank_gate": True}},
    ffns={"d": {"type": "dense", "intermediate_size": 96, "gated": False, "bias": True},
          "e": {"type": "moe", "num_experts": 6, "experts_per_token": 2, "moe_intermediate_size": 32,
                "gated": False, "num_shared_experts": 1, "expert_bias": True}},
    layer_types={"A": {"mixer": "g", "ffn": "d"}, "B": {"mixer": "m", "ffn": "e"}, "C": {"mixer": "s", "ffn": "d"},
                 "D": {"mixer": "k", "ffn": "e"}})


def test_features_by_hand_at_tp2():
    m = model_from_dict(FEATURES)
    h = 64
    a = _layer(m, "layers.0")
    # q (with bias) 4 heads of 16, k/v one head each with bias, o and its whole bias, the output
    # gate, full-width q/k norms by head, 4 sinks; an ungated MLP of 48 with its up bias split
    gqa = (64 * 64 + 64) + 2 * (64 * 16 + 16) + (64 * 64 + 64) + 64 * 64 + (64 + 16) + 4
    mlp = 64 * 48 + 48 + 48 * 64 + 64
    assert V.rank_params(a, h, 2) == gqa + mlp + 2 * h
    s = _layer(m, "layers.2")
    # Mamba-2 at 2: in_proj width 2*64 + 2*16 + 4 with its bias, conv over 64 + 32 channels (no
    # bias), dt_bias / A_log / D 4 each, norm 64, out 64*64 and its whole bias
    mamba = (64 * 164 + 164) + 96 * 4 + 12 + 64 + (64 * 64 + 64)
    assert V.rank_params(s, h, 2) == mamba + mlp + 2 * h
    assert V.rank_state_elements(s, h, 2) == (4 * 16 * 16, 96 * 3)


@pytest.mark.parametrize("g", [2, 4, 8])
@pytest.mark.parametrize("ep", [False, True])
def test_features_agree_with_the_solver(g, ep):
    m = model_from_dict(FEATURES)
    _agree(m, g, ep)


def _agree(m, g, ep):
    h = m.hidden_size
    refused = P.model_refusal(m, g, ep)
    mine = next((f"{x.name}: {w}" for x in m.layers if (w := V.rank_refusal(x, h, g, ep))), None)
    assert (refused is None) == (mine is None), (m.name, g, ep, refused, mine)
    if refused is not None:
        return
    for x in m.layers:
        assert V.rank_params(x, h, g, ep) == P.params_per_rank(x, h, g, ep), (m.name, x.name, g, ep)
        assert V.rank_kv_elements(x, h, g) == P.kv_elements_per_rank(x, h, g), (m.name, x.name, g)
        assert V.rank_state_elements(x, h, g) == P.state_elements_per_rank(x, h, g), (m.name, x.name, g)


@pytest.mark.parametrize("path", list_models(), ids=lambda p: p.stem)
def test_catalog_models_agree_with_the_solver_at_every_degree(path):
    m = load_model(path, text_only=True)
    for g in (2, 4, 8, 16):
        for ep in (False, True):
            _agree(m, g, ep)


def test_kimi_k3_latent_moe_by_hand_at_tp8():
    """The latent MoE's projections and norm whole on every rank, its 896 experts at the latent
    width 3584, 1/8 of each (weights at 16 bits: --weight-bits, not the stored formats)."""
    m = load_model("kimi-k3-hf", text_only=True)
    x, h = _layer(m, "layers.1"), m.hidden_size
    moe = dict(x.ffn_dims)
    latent, i, e = moe["latent_size"], moe["moe_intermediate_size"], moe["num_experts"]
    ffn = (e * h + e                                          # router and its bias
           + 2 * h * latent + latent                          # latent down / up, latent norm
           + e * 3 * latent * (i // 8)                        # experts, 1/8 of each
           + 3 * h * (2 * i) // 8)                            # two shared experts, fused, 1/8
    # KDA with a full-rank gate, 96 heads of 128: 12 heads (1536 channels) per rank
    proj = 12 * 128
    kda = (3 * h * proj + 3 * proj * 4                        # q, k, v and their short convs
           + h * 128 + 128 * proj                             # decay: f_a whole, f_b split
           + h * proj + h * 12 + 12 + proj                    # full-rank gate, beta, A_log, dt_bias
           + 128 + proj * h)                                  # o_norm whole, o_proj
    assert V.rank_params(x, h, 8) == kda + ffn + x.params_other == P.params_per_rank(x, h, 8)
    wl = workload_for(m)
    assert V.stored_formats_refusal(m.layers, wl, h, 8) is None    # as stored: every slice on a group boundary
    # as stored, by hand: bf16 everywhere but the latent projections and experts (MXFP4: 4 bits and
    # one uint8 scale per 32 weights of a row), each of the 896 experts 384 of 3072 wide per rank
    mx = 17 / 32                                                  # bytes per MXFP4 weight with its scale
    stored = 2 * (kda + ffn + x.params_other - 2 * h * latent - e * 3 * latent * (i // 8)) \
        + int(2 * h * latent * mx) + int(e * 3 * latent * (i // 8) * mx)
    assert V.rank_weight_bytes(x, h, wl, 8) == stored == P.weight_bytes_per_rank(x, h, wl, 8)


# ----------------------------------------------------------------------------- mappings
@pytest.fixture(scope="module")
def llama_tp8():
    m = load_model("llama-3.1-70b")
    fleet = load_fleet("h100")
    solved = place_instance(build_instance(m, fleet, workload_for(m, context="128k", concurrency=32),
                                           Requirements(), tp=8), SolverSettings(time_limit=20, threads=1))
    return m, fleet, solved


def test_tampered_per_rank_bytes_are_caught(llama_tp8):
    m, fleet, solved = llama_tp8
    doc = solved.mapping
    assert validate_mapping(doc, model=m, fleet=fleet) == []
    bad = copy.deepcopy(doc)
    bad["stages"][1]["bytes"]["weights"] -= 2 * 8192       # as if one replicated norm were split
    bad["stages"][1]["bytes"]["free"] += 2 * 8192
    found = validate_mapping(bad, model=m, fleet=fleet)
    assert [v.kind for v in found] == ["bytes_mismatch"] and "weights states" in found[0].message


def test_a_solver_with_wrong_per_rank_rules_is_caught(monkeypatch):
    """Break the solver's rule (past n_kv KV heads dropped instead of replicated) and solve: the
    validator, with rules of its own, refuses the plan."""
    m = load_model("llama-3.1-8b")                           # 8 KV heads
    wl = workload_for(m, context="32k", concurrency=8)
    fleet = fleet_from_dict({"name": "gpus16", "device": {"kind": "gpu", "memory": "80 GB"},
                             "fleet": {"racks": 1, "per_rack": 16}})
    honest = place_instance(build_instance(m, fleet, wl, Requirements(), tp=16),
                            SolverSettings(time_limit=10, threads=1))
    assert validate_mapping(honest.mapping, model=m, fleet=fleet) == []
    monkeypatch.setattr(P, "kv_heads_per_rank", lambda nkv, g: nkv // g)   # 0 heads at 16 > 8
    broken = place_instance(build_instance(m, fleet, wl, Requirements(), tp=16),
                            SolverSettings(time_limit=10, threads=1))
    assert broken.mapping["stages"][0]["bytes"]["kv_reserve"] == 0
    found = validate_mapping(broken.mapping, model=m, fleet=fleet)
    assert any(v.kind == "bytes_mismatch" and "kv_reserve states 0" in v.message for v in found)


def test_hop_latency_counts_the_all_reduces_by_hand(llama_tp8):
    m, fleet, solved = llama_tp8
    s = solved.mapping["summary"]
    # 80 decoder layers x 2 all-reduces + 1 for the embedding, each a ring over 8 GPUs: 2 x 7 steps
    # of the 2 us NVLink latency; 2 hops between nodes of 4 us
    group = (80 * 2 + 1) * 2 * 7 * 2
    assert s["group_latency_us"] == group == 4508
    assert s["hop_latency_us"] == group + 2 * 4
    latency = next(lv for lv in solved.result.levels if lv.name == "latency")
    assert latency.proven and latency.value == latency.bound == 4516
    bad = copy.deepcopy(solved.mapping)
    bad["summary"]["hop_latency_us"] = 8.0                 # the hops alone
    found = validate_mapping(bad, model=m, fleet=fleet)
    assert [v.kind for v in found] == ["summary_mismatch"] and "4516" in found[0].message
    bad = copy.deepcopy(solved.mapping)
    bad["summary"]["group_latency_us"] = 4508 - 28          # the embedding's all-reduce left out
    found = validate_mapping(bad, model=m, fleet=fleet)
    assert [v.kind for v in found] == ["summary_mismatch"] and "4508" in found[0].message
    bad = copy.deepcopy(solved.mapping)
    del bad["summary"]["group_latency_us"]                  # then the hop latency is the hops alone
    found = validate_mapping(bad, model=m, fleet=fleet)
    assert [v.kind for v in found] == ["summary_mismatch"] and "the stages make 8.0" in found[0].message


def test_expert_parallel_latency_by_hand():
    m = load_model("qwen3-235b")                             # 94 MoE layers
    fleet = load_fleet("h200", racks=8)
    solved = place_instance(build_instance(m, fleet, workload_for(m), Requirements(), tp=8, ep=True),
                            SolverSettings(time_limit=20, threads=1))
    s = solved.mapping["summary"]
    # an MoE layer under EP: one all-reduce (2 x 7 steps) and two all-to-alls (7 each), 2 us each
    assert s["group_latency_us"] == 94 * (14 + 2 * 7) * 2 + 14 * 2
    assert validate_mapping(solved.mapping, model=m, fleet=fleet) == []


def test_groups_with_different_links_keep_the_bound_valid():
    """One node's GPUs are joined faster than the other's: the bound adds the cheaper term, and the
    level is proven only when the placement sits on the cheap node."""
    spec = {"name": "gpus", "device": {"kind": "gpu", "memory": "80 GB"},
            "fleet": {"racks": 2, "per_rack": 2, "intra_rack_latency_us": 5, "inter_rack_latency_us": 9,
                      "extra_links": [{"a": "r1g0", "b": "r1g1", "latency_us": 1}]}}
    fleet = fleet_from_dict(spec)
    m = load_model("llama-3.1-8b")
    wl = Workload(context_tokens=1024, concurrency=1)
    solved = place_instance(build_instance(m, fleet, wl, Requirements(), tp=2),
                            SolverSettings(time_limit=10, threads=1))
    s = solved.mapping["summary"]
    members = solved.mapping["stages"][0]["group"]["devices"]
    link = 1 if members[0].startswith("r1") else 5
    assert len(solved.mapping["stages"]) == 1
    assert s["group_latency_us"] == (32 * 2 + 1) * 2 * 1 * link
    latency = next(lv for lv in solved.result.levels if lv.name == "latency")
    assert latency.bound == (32 * 2 + 1) * 2 * 1 * 1
    assert latency.proven == (link == 1)
    assert validate_mapping(solved.mapping, model=m, fleet=fleet) == []


# ----------------------------------------------------------------------------- independence
def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = ("." * node.level) + (node.module or "")
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)    # a submodule imported by name
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_validator_shares_no_code_with_the_solver_path():
    solver = ("placer.algorithms", "placer.planning", "placer.problem.parallel", "placer.problem.instance",
              "placer.problem.placement", "placer.problem.reductions.tensor_parallel",
              "placer.problem.reductions.attention_dp")
    for name in ("validate.py", "ranks.py", "dp_ranks.py"):
        found = _imports(PLACER / "mapping" / name)
        assert "placer.problem.memory" in found, (name, found)   # the walk sees imports
        assert not [i for i in found if i.startswith(solver)], (name, found)
    for name in ("checks.py", "violations.py", "view.py"):    # the checks, their findings, the view they read
        found = _imports(PLACER / "mapping" / name)
        assert not [i for i in found if i.startswith(solver)], (name, found)


CORPUS = FIXTURES / "hf_corpus"
STORED = ["deepseek-ai--DeepSeek-V3", "moonshotai--Kimi-K2.5", "nvidia--Qwen3-235B-A22B-NVFP4",
          "nvidia--MiniMax-M2.5-NVFP4", "nvidia--Llama-3.1-70B-Instruct-FP8", "openai--gpt-oss-120b",
          "zai-org--GLM-4.5-Air", "Qwen--Qwen3-32B-FP8"]


@pytest.mark.parametrize("stem", STORED)
def test_stored_formats_per_rank_agree_with_the_solver(stem):
    """The validator's slices (its own rules by tensor name) give the solver's per-rank bytes and
    refuse the same degrees, for checkpoints in fp8 blocks, NVFP4, MXFP4 and int4 groups."""
    from placer.specs.workload import Workload

    m = load_model(CORPUS / f"{stem}.json", text_only=True)
    h, wl = m.hidden_size, Workload()
    for g in (2, 4, 8):
        for ep in (False, True):
            if P.model_refusal(m, g, ep):
                continue
            solver, mine = P.stored_refusal(m, wl, g, ep), V.stored_formats_refusal(m.layers, wl, h, g, ep)
            assert (solver is None) == (mine is None), (g, ep, solver, mine)
            if solver is not None:
                continue
            for x in m.layers:
                if V.rank_refusal(x, h, g, ep) is None:
                    assert V.rank_weight_bytes(x, h, wl, g, ep) == P.weight_bytes_per_rank(x, h, wl, g, ep), (x.name, g)


def test_stored_format_plan_at_tp_validates_and_a_solver_that_drops_scales_is_caught(monkeypatch):
    """An NVFP4 checkpoint planned at tp 4 as stored validates; a solver that forgot the slices'
    fp8 scales (4 bits per weight only) is refused by the validator's own slicing."""
    m = load_model(CORPUS / "nvidia--MiniMax-M2.5-NVFP4.json")
    fleet = load_fleet("h100", racks=1)
    wl = workload_for(m, context="8k", concurrency=8)
    honest = place_instance(build_instance(m, fleet, wl, Requirements(), tp=4),
                            SolverSettings(time_limit=10, threads=1))
    assert validate_mapping(honest.mapping, model=m, fleet=fleet) == []
    real = slices.tensor_bytes
    monkeypatch.setattr(slices, "tensor_bytes", lambda shape, fmt, stacked=False: real(
        shape, fmt.__class__(bits=fmt.bits), stacked=stacked))
    broken = place_instance(build_instance(m, fleet, wl, Requirements(), tp=4),
                            SolverSettings(time_limit=10, threads=1))
    found = validate_mapping(broken.mapping, model=m, fleet=fleet)
    assert found[0].kind == "bytes_mismatch" and "weights states 30,163,441,664, recomputed 33,674,455,040" \
        in found[0].message
    assert {v.kind for v in found} <= {"bytes_mismatch", "concurrency_overstated"}
