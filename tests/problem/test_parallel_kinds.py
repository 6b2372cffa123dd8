"""Per-rank bytes of every layer kind placer imports, against an independent count: by hand from the
config's dimensions, divided as vLLM / SGLang shard each tensor, for one model per kind (the
solver's rules, placer.problem.parallel, and the validator's, placer.mapping.ranks, both)."""

from __future__ import annotations

import pytest
from dirs import FIXTURES

from placer.mapping import ranks as V
from placer.problem import parallel as P
from placer.specs.hf.meta import meta_available
from placer.specs.model import load_model
from placer.specs.workload import workload_for

CORPUS = FIXTURES / "hf_corpus"
needs_meta = pytest.mark.skipif(not meta_available(), reason="the hf extra (transformers, torch) is not installed")


def _layer(m, name):
    return next(x for x in m.layers if x.name == name)


def _both(x, h, g, ep=False):
    """The heaviest rank's parameters by the solver's rule, checked equal to the validator's."""
    mine = P.params_per_rank(x, h, g, ep)
    assert V.rank_params(x, h, g, ep) == mine, x.name
    return mine


def test_dsa_indexer_replicated_at_tp8():
    """DeepSeek-V3.2: MLA with 128 heads (16 a rank) and the DSA indexer (64 heads of 128 over
    q_lora 1536) replicated as vLLM's and SGLang's ReplicatedLinear indexer; the latent (512 + 64)
    and the indexer key (128) cached whole on every rank."""
    m = load_model(CORPUS / "deepseek-ai--DeepSeek-V3.2.json")
    x, h = _layer(m, "layers.3"), 7168
    mla = h * 1536 + 1536 + 1536 * 16 * 192 + h * 576 + 512 + 512 * 16 * 256 + 16 * 128 * h
    indexer = 1536 * 64 * 128 + h * 128 + 2 * 128 + h * 64
    moe = 256 * h + 256 + 3 * h * 2048 // 8 + 256 * 3 * h * 256
    assert _both(x, h, 8) == mla + indexer + moe + 2 * h
    assert P.kv_elements_per_rank(x, h, 8) == V.rank_kv_elements(x, h, 8) == 512 + 64 + 128
    assert P.model_refusal(m, 8) is None


def test_mamba2_and_ffn_only_layers_at_tp2():
    """Nemotron-3-Nano (published vLLM recipes serve it at TP 2): a Mamba-2 mixer alone (64 heads of
    64, 8 groups of state 128, conv 4) and an MoE layer with no mixer (128 ungated experts of 1856,
    one shared of 3712; the router whole), as vLLM's MambaMixer2 and fused MoE shard them."""
    m = load_model(CORPUS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json")
    h = 2688
    mamba, moe = _layer(m, "layers.0"), _layer(m, "layers.1")
    conv = 2048 + 2 * 4 * 128                                     # x, then B and C of 4 groups a rank
    in_proj = h * (2 * 2048 + 2 * 4 * 128 + 32)                   # x, z, B, C and 32 dt heads
    assert _both(mamba, h, 2) == in_proj + conv * 4 + conv + 3 * 32 + 2048 + 2048 * h + h
    assert P.state_elements_per_rank(mamba, h, 2) == V.rank_state_elements(mamba, h, 2) == (32 * 64 * 128, conv * 3)
    assert _both(moe, h, 2) == 128 * h + 128 * 2 * h * 928 + 2 * h * 1856 + h       # the router whole
    assert P.model_refusal(m, 2) is None


def test_nas_pruned_layer_without_attention_at_tp8():
    """Llama-3.3-Nemotron-Super-49B: a layer whose attention is pruned keeps a SwiGLU MLP of 14336."""
    m = load_model(CORPUS / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json")
    x, h = _layer(m, "layers.6"), 8192
    assert _both(x, h, 8) == 3 * h * 14336 // 8 + h
    assert P.model_refusal(m, 8) is None


def test_lightning_and_mamba1_at_tp8():
    """MiniMax-Text-01's lightning attention (64 heads of 128) and Jamba's Mamba-1 (inner 16384,
    state 16, dt rank 512), each with their FFN."""
    m = load_model(FIXTURES / "hf" / "minimax-text-01.json")
    x, h = _layer(m, "layers.0"), 6144
    inner = 8 * 128
    assert _both(x, h, 8) == 4 * h * inner + inner * h + inner + 32 * h + 32 * 3 * h * 9216 // 8 + 2 * h
    assert P.state_elements_per_rank(x, h, 8) == (8 * 128 * 128, 0)
    j = load_model(FIXTURES / "hf" / "jamba-1.5-large.json")
    y, h = _layer(j, "layers.0"), 8192
    di = 16384 // 8
    mixer = h * 2 * di + di * 4 + di + di * (512 + 32) + 512 * di + di + di * 16 + di + di * h
    assert _both(y, h, 8) == mixer + 3 * h * 24576 // 8 + 2 * h
    assert V.rank_state_elements(y, h, 8) == P.state_elements_per_rank(y, h, 8) == (di * 16, di * 3)


def test_mtp_layer_at_tp8():
    """DeepSeek-V3's multi-token-prediction layer: a decoder layer's rule, plus its own 2h -> h
    projection and norms whole (vLLM's eh_proj is a plain, replicated Linear)."""
    m = load_model(FIXTURES / "hf" / "deepseek-v3.json", mtp=True)
    h = 7168
    mtp, dec = _layer(m, "mtp.0"), _layer(m, "layers.3")
    assert _both(mtp, h, 8) == _both(dec, h, 8) + 2 * h * h + 3 * h
    wl = workload_for(m)                                           # as stored: fp8 blocks
    assert P.weight_bytes_per_rank(mtp, h, wl, 8) == V.rank_weight_bytes(mtp, h, wl, 8)


@needs_meta
def test_meta_import_qwen3_vl_moe_at_tp8():
    """Qwen3-VL-30B-A3B through the meta device: each tensor split by its name. 32 query heads of
    128 (4 a rank), 4 KV heads (one replicated a rank at 8), full q/k norms per head dim whole,
    128 experts with a fused gate-up of 2 x 768 (96 a rank), the router whole; the vocabulary
    151936 over 8 ranks."""
    m = load_model(CORPUS / "Qwen--Qwen3-VL-30B-A3B-Instruct.json", text_only=True)
    x, h = _layer(m, "layers.0"), 2048
    attention = 4 * 128 * h + 2 * 128 * h + h * 4 * 128 + 2 * 128
    experts = 128 * (2 * 96) * h + 128 * h * 96
    assert _both(x, h, 8) == attention + experts + 128 * h + 2 * h
    assert _both(x, h, 8, ep=True) == attention + 16 * 3 * 768 * h + 128 * h + 2 * h
    assert P.kv_elements_per_rank(x, h, 8) == V.rank_kv_elements(x, h, 8) == 2 * 128
    assert _both(_layer(m, "embedding"), h, 8) == 18992 * h
    assert P.model_refusal(m, 8) is None and P.model_refusal(m, 3) is not None


@needs_meta
def test_meta_import_deepseek_v4_at_tp8():
    """DeepSeek-V4-Flash through the meta device, as vLLM's deepseek_v4.py shards it: q_a and the
    one shared KV head replicated (fused_wqa_wkv, disable_tp), q_b column (64 heads of 512), the
    grouped o_a column by group and o_b row, sinks by head, hyper-connection mixers whole; the
    latent cache whole on every rank."""
    m = load_model(CORPUS / "deepseek-ai--DeepSeek-V4-Flash.json", text_only=True)
    x, h = _layer(m, "layers.0"), 4096
    attention = 8 + (1024 * h + 1024) + 4096 * 1024 + (512 * h + 512) + 1024 * h + h * 1024
    moe = 256 * h + 256 * 512 * h + 256 * h * 256 + 3 * 256 * h
    hc = 2 * (24 * 16384 + 24 + 3)
    assert _both(x, h, 8) == attention + moe + 2 * h + hc
    assert P.kv_elements_per_rank(x, h, 8) == x.kv_elements_per_token


@needs_meta
def test_meta_import_under_expert_and_attention_data_parallelism():
    """DeepSeek-V4-Flash's stacked experts (256) spread whole: under attention data parallelism a
    rank holds its layer whole but 32 of the experts (the solver's rule and the validator's); under
    --ep 8 the same 32 experts and the attention split as at tp 8."""
    from placer.mapping.dp_ranks import dp_rank_params
    from placer.problem.reductions.attention_dp import dp_params_per_rank

    m = load_model(CORPUS / "deepseek-ai--DeepSeek-V4-Flash.json", text_only=True)
    x, h = _layer(m, "layers.0"), 4096
    assert x.ffn == "moe"
    experts = 256 * (4096 * h + h * 2048)
    whole = x.params - experts + 32 * (4096 * h + h * 2048)
    assert dp_params_per_rank(x, h, 8) == dp_rank_params(x, h, 8) == whole
    assert _both(x, h, 8, ep=True) == _both(x, h, 8)               # 32 whole experts = 1/8 of each of 256


def test_nemotron_h_plan_validates_and_exports_its_pattern():
    """Nemotron-3-Super (FP8, Mamba-2 / MoE / attention layers, each a sub-block alone) at tp 4:
    the plan validates, each layer's one all-reduce is counted, and the exports run it at TP 4
    (Megatron's hybrid pattern is the checkpoint's own)."""
    import json

    from placer.export import ExportOptions, export_mapping
    from placer.mapping.validate import validate_mapping
    from placer.planning import Placement, Requirements, SolverSettings, plan
    from placer.specs.fleet import load_fleet

    path = CORPUS / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json"
    m, fleet = load_model(path), load_fleet("b200")
    p = plan(m, fleet, workload_for(m, context="32k", concurrency=8),
             Requirements(placement=Placement(degrees=(4,))), SolverSettings(method="dp"))
    assert p.feasible and p.solved.instance.tp == 4
    assert validate_mapping(p.mapping, model=m, fleet=fleet) == []
    link = min(lat for _, _, lat, _ in fleet.links)
    assert p.mapping["summary"]["group_latency_us"] == pytest.approx((88 + 1) * 2 * 3 * link)
    vllm = export_mapping(p.mapping, "vllm", model=m, fleet=fleet, options=ExportOptions())
    assert "--tensor-parallel-size 4" in vllm.text
    pattern = json.loads(path.read_text())["hybrid_override_pattern"]
    megatron = export_mapping(p.mapping, "megatron", model=m, fleet=fleet, options=ExportOptions())
    assert f"--hybrid-override-pattern '{pattern}'" in megatron.text
