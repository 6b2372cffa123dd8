"""Per-rank bytes under tensor / expert parallelism, against numbers computed by hand."""

from __future__ import annotations

import pytest

from placer.problem import memory
from placer.problem import parallel as P
from placer.specs.layers import ffn_counts, mixer_counts
from placer.specs.model import load_model, model_from_dict
from placer.specs.workload import workload_for

CATALOG = ["llama-3.1-70b", "deepseek-v3", "qwen3-235b", "qwen3-next-80b", "kimi-linear-48b",
           "jamba-1.5-large", "minimax-text-01", "gpt-oss-120b", "kimi-k2", "llama-3.1-405b", "kimi-k3-hf"]


def _layer(model, name):
    return next(x for x in model.layers if x.name == name)


@pytest.mark.parametrize("name", CATALOG)
def test_degree_one_is_the_whole_layer(name):
    # the rank formulas at g = 1 reproduce placer.specs.layers' counts for every layer
    m = load_model(name)
    wl = workload_for(m)
    for x in m.layers:
        if x.mixer_dims:
            d = P.with_inner(dict(x.mixer_dims), m.hidden_size)
            p = P._mixer_params(d, m.hidden_size, 1) + x.params_other
            if x.ffn_dims:
                p += P._ffn_params(dict(x.ffn_dims), m.hidden_size, 1, False)
            assert p == x.params, x.name
            assert p == mixer_counts(d, m.hidden_size).params + x.params_other + (
                ffn_counts(dict(x.ffn_dims), m.hidden_size).params if x.ffn_dims else 0)
        assert P.weight_bytes_per_rank(x, m.hidden_size, wl, 1) == memory.weight_bytes(x, wl)
        assert P.kv_bytes_per_token_per_rank(x, m.hidden_size, wl, 1) == memory.kv_bytes_per_token(x, wl)


def test_llama_70b_tp2_tp8_tp16():
    m = load_model("llama-3.1-70b")      # h 8192, 64 q heads, 8 KV heads, head_dim 128, MLP 28672
    wl = workload_for(m)                 # 16-bit weights and KV
    x = _layer(m, "layers.0")
    h = 8192
    # TP 2: q 8192*32*128, k+v 2*8192*4*128, o 32*128*8192, MLP 3*8192*14336, norms 2*8192
    tp2 = 33_554_432 + 8_388_608 + 33_554_432 + 352_321_536 + 16_384
    assert tp2 == 427_835_392
    assert P.params_per_rank(x, h, 2) == tp2
    assert P.weight_bytes_per_rank(x, h, wl, 2) == 855_670_784
    assert P.kv_bytes_per_token_per_rank(x, h, wl, 2) == 2 * 4 * 128 * 2          # 4 KV heads per rank
    # TP 8: one KV head per rank
    tp8 = 8_388_608 + 2_097_152 + 8_388_608 + 88_080_384 + 16_384
    assert P.params_per_rank(x, h, 8) == tp8 == 106_971_136
    assert P.weight_bytes_per_rank(x, h, wl, 8) == 213_942_272
    assert P.kv_bytes_per_token_per_rank(x, h, wl, 8) == 512
    # TP 16 > 8 KV heads: each rank keeps one whole KV head (replicated), q/o/MLP halve again
    tp16 = 4_194_304 + 2_097_152 + 4_194_304 + 44_040_192 + 16_384
    assert P.params_per_rank(x, h, 16) == tp16 == 54_542_336
    assert P.kv_bytes_per_token_per_rank(x, h, wl, 16) == 512                      # not 256: replicated
    assert P.kv_bytes_per_request_per_rank(x, h, wl.replace(context_tokens=131072), 16) == 512 * 131072
    # vocabulary-parallel embedding and head: ceil(128256 / 8) = 16032 rows; the final norm whole
    assert P.params_per_rank(_layer(m, "embedding"), h, 8) == 16_032 * 8192
    assert P.params_per_rank(_layer(m, "lm_head"), h, 8) == 16_032 * 8192 + 8192


def test_deepseek_v3_tp8_mla_latent_whole_and_experts_split_vs_ep():
    m = load_model("deepseek-v3")        # h 7168, 128 MLA heads, fp8 weights, bf16 latent
    wl = workload_for(m)
    h = 7168
    # MLA at TP 8 (16 heads per rank): q_a 7168*1536 + q_b 1536*16*192 + q_a norm 1536
    # + kv_a 7168*576 + kv_a norm 512 + kv_b 512*16*256 + o 16*128*7168
    mla = 11_010_048 + 4_718_592 + 1_536 + 4_128_768 + 512 + 2_097_152 + 14_680_064
    assert mla == 36_636_672
    dense = 3 * h * 2304                 # MLP 18432 / 8
    x0 = _layer(m, "layers.0")
    assert P.params_per_rank(x0, h, 8) == mla + dense + 2 * h == 86_196_224
    assert P.weight_bytes_per_rank(x0, h, wl, 8) == 86_196_224            # 8-bit weights
    # the latent cache is not split: 512 + 64 elements per token on every rank, 1152 B at 16 bits
    for tp in (1, 2, 8, 16):
        assert P.kv_bytes_per_token_per_rank(x0, h, wl, tp) == 1152
    # MoE layer, experts tensor-split: 256 experts x 3*7168*256 + shared 3*7168*2048/8 + router
    x3 = _layer(m, "layers.3")
    split = 256 * 5_505_024 + 5_505_024 + (256 * h + 256)
    assert P.params_per_rank(x3, h, 8) == mla + split + 2 * h == 1_453_277_440
    # EP 8: 32 whole experts of 44,040,192 per rank; shared expert still tensor-split, router whole.
    # 256 experts divide by 8, so the heaviest rank holds exactly what the split gives.
    ep = 32 * 44_040_192 + 5_505_024 + (256 * h + 256)
    assert P.params_per_rank(x3, h, 8, ep=True) == mla + ep + 2 * h == 1_453_277_440


def test_ep_remainder_heaviest_rank():
    # 10 experts over 4 ranks: vLLM gives ranks 0-1 three experts, 2-3 two; the heaviest holds 3
    spec = dict(name="toy-moe", hidden_size=64, num_layers=1, pattern="A",
                mixers={"a": {"type": "gqa", "num_heads": 4, "num_kv_heads": 4, "head_dim": 16}},
                ffns={"m": {"type": "moe", "num_experts": 10, "experts_per_token": 2,
                            "moe_intermediate_size": 32}},
                layer_types={"A": {"mixer": "a", "ffn": "m"}})
    m = model_from_dict(spec)
    x = m.layers[0]
    attn = 64 * 16 + 2 * 64 * 16 + 16 * 64            # one of 4 heads per rank, q k v o
    router = 10 * 64
    assert P.params_per_rank(x, 64, 4, ep=True) == attn + 3 * (3 * 64 * 32) + router + 2 * 64
    assert P.params_per_rank(x, 64, 4) == attn + 10 * (3 * 64 * 8) + router + 2 * 64


def test_qwen3_235b_ep8():
    m = load_model("qwen3-235b")         # h 4096, 64 q / 4 KV heads, 128 experts of 1536
    wl = workload_for(m)
    x = _layer(m, "layers.0")
    # attention: q 4096*8*128, k+v 2*4096*1*128 (8 > 4 KV heads: one per rank), o 8*128*4096,
    # q/k norms 2*128; experts 16 whole x 3*4096*1536; router 128*4096; norms 2*4096
    attn = 4_194_304 + 1_048_576 + 4_194_304 + 256
    ffn = 16 * 18_874_368 + 524_288
    assert P.params_per_rank(x, 4096, 8, ep=True) == attn + ffn + 8192 == 311_959_808
    assert P.weight_bytes_per_rank(x, 4096, wl, 8, ep=True) == 623_919_616
    assert P.kv_bytes_per_token_per_rank(x, 4096, wl, 8) == 512           # 2 x 1 head x 128 x 2 B


def test_qwen3_next_tp4_gated_deltanet_and_gated_attention():
    m = load_model("qwen3-next-80b")     # h 2048; GDN 16 k / 32 v heads of 128; attention 16 / 2 of 256
    wl = workload_for(m)                 # state and conv state at 16 bits
    h = 2048
    gdn = _layer(m, "layers.0")
    # qkvz 2048*(2*512 + 2*1024) + ba 2048*2*8 + conv 2048*4 + dt_bias/A_log 16 + norm 128 + out 1024*2048
    mixer = 6_291_456 + 32_768 + 8_192 + 16 + 128 + 2_097_152
    moe = 512 * 3 * h * 128 + (3 * h * 512 // 4 + h) + 512 * h
    assert P.params_per_rank(gdn, h, 4) == mixer + moe + 2 * h
    # state split by heads: recurrent 8 * 128 * 128, conv 3 * (2*4*128 + 8*128), both bf16
    assert P.state_elements_per_rank(gdn, h, 4) == (131_072, 6_144)
    assert P.state_bytes_per_request_per_rank(gdn, h, wl, 4) == 274_432
    assert P.state_bytes_per_request_per_rank(gdn, h, wl, 4) * 4 == memory.state_bytes_per_request(gdn, wl)
    att = _layer(m, "layers.3")
    # 4 query heads (with gate) per rank; 4 > 2 KV heads: one replicated head per rank
    assert P.params_per_rank(att, h, 4) == (2048 * 4 * 256 * 2 + 2 * 2048 * 256 + 4 * 256 * 2048 + 512
                                            + moe + 2 * h)
    assert P.kv_bytes_per_token_per_rank(att, h, wl, 4) == 1024          # half of 2048, not a quarter


def test_non_dividing_degree_refused_with_reason():
    m = load_model("llama-3.1-70b")
    ok, refused = P.allowed_degrees(m, [1, 2, 3, 8, 6])
    assert ok == [1, 2, 8]
    assert refused[3] == "layers.0: 64 attention heads do not divide by tp 3 (--tp 2 divides them)"
    assert "do not divide by tp 6" in refused[6]
    with pytest.raises(ValueError, match="do not divide by tp 3"):
        P.params_per_rank(m.layers[1], m.hidden_size, 3)
    # one refusal for heads given as dimensions and as tensors, worded alike down to a hint of 1
    from dataclasses import replace

    from placer.problem.named_shards import named_refusal

    odd = replace(m.layers[1], mixer_dims=tuple((k, 7 if k in ("num_heads", "num_kv_heads") else v)
                                                for k, v in m.layers[1].mixer_dims))
    assert P.refusal(odd, m.hidden_size, 2) == "layers.0: 7 attention heads do not divide by tp 2 (--tp 1 divides them)"
    named = replace(m.layers[1], mixer_dims=(), heads=(7, 7), tensors=())
    assert named_refusal(named, 2) == "7 attention heads do not divide by tp 2 (--tp 1 divides them)"
    assert named_refusal(replace(named, heads=(64, 8)), 3) == refused[3].removeprefix("layers.0: ")
    # KV heads: 8 KV heads, tp 16 replicates, tp 12 is no multiple of 8 (and 64 heads refuse it first)
    q = load_model("qwen3-235b")         # 4 KV heads, 64 q heads
    assert P.refusal(q.layers[1], q.hidden_size, 32) is None
    # expert width 1536 / 1024 does not divide; EP spreads whole experts instead
    spec = dict(name="toy", hidden_size=64, num_layers=1, pattern="A",
                mixers={"a": {"type": "gqa", "num_heads": 8, "num_kv_heads": 8, "head_dim": 8}},
                ffns={"m": {"type": "moe", "num_experts": 8, "experts_per_token": 2, "moe_intermediate_size": 12}},
                layer_types={"A": {"mixer": "a", "ffn": "m"}})
    t = model_from_dict(spec)
    assert P.refusal(t.layers[0], 64, 8) == ("layers.0: expert width 12 does not divide by tp 8 "
                                             "(--ep spreads whole experts instead)")
    assert P.refusal(t.layers[0], 64, 8, ep=True) is None


def test_total_size_layers_run_at_degree_one_only():
    m = load_model("kimi-k3")            # layer types given as parameter totals
    assert P.allowed_degrees(m, [1, 2])[0] == [1]
    assert "size as a total" in P.model_refusal(m, 2)


def test_shard_model_fixes_per_rank_bytes():
    m = load_model("llama-3.1-70b")
    wl = workload_for(m, context="128k", concurrency=32)
    s = P.shard_model(m, wl, 8)
    x = s.layers[1]
    assert memory.weight_bytes(x, wl) == 213_942_272
    assert memory.kv_bytes_per_request(x, wl) == 512 * 131_072
    assert P.shard_model(m, wl, 1) is m


def test_kimi_k3_tp8_full_rank_gate_output_gate_and_latent_moe():
    """Kimi K3 (config.json) at tp 8, 4-bit weights: KDA with a full-rank output gate, MLA with an
    output gate, a latent MoE whose projections are replicated and whose experts run at the latent width."""
    from placer.specs.workload import Workload

    m = load_model("kimi-k3-hf", text_only=True)
    h, g = 7168, 8
    kda, mla = _layer(m, "layers.1"), _layer(m, "layers.3")
    assert (kda.mixer, kda.ffn, mla.mixer, mla.ffn) == ("kda", "moe", "mla", "moe")
    # KDA, 96 heads of 128 (12 per rank, 1,536 channels)
    kda_mixer = (3 * h * 1536            # q, k, v: column
                 + h * 128 + 128 * 1536  # decay f_a (replicated), f_b (column)
                 + 1536 * h              # full-rank output gate g_proj: column
                 + h * 12                # beta b_proj: column
                 + 3 * 1536 * 4          # three short convs, kernel 4: by channel
                 + 12 + 1536             # A_log by head, dt_bias by channel
                 + 128                   # o_norm over head_dim: replicated
                 + 1536 * h)             # o_proj: row
    # MLA, 96 heads (12 per rank), q_lora 1536, kv_lora 512, nope 128, rope 64, v 128, output gate
    mla_mixer = (h * 1536 + 1536 + 1536 * 12 * 192   # q_a + its norm (replicated), q_b (column)
                 + h * 576 + 512                     # kv_a with the rope key + its norm (replicated)
                 + 512 * 12 * 256                    # kv_b: column
                 + 12 * 128 * h                      # o_proj: row
                 + h * 12 * 128)                     # output gate g_proj: column
    # latent MoE: 896 experts of width 3072 on a 3,584 latent; 2 shared experts (3072 each) on h
    latent = 2 * h * 3584 + 3584                     # down / up projections and the latent norm: replicated
    router = 896 * h + 896
    shared = 3 * h * (2 * 3072 // g)
    split_experts = 896 * 3 * 3584 * (3072 // g)     # every expert, 1/8 of its width
    ep_experts = 112 * 3 * 3584 * 3072               # 896 / 8 whole experts
    norms = 2 * h
    assert P.params_per_rank(kda, h, g) == kda_mixer + latent + router + shared + split_experts + norms
    assert P.params_per_rank(kda, h, g, ep=True) == kda_mixer + latent + router + shared + ep_experts + norms
    assert P.params_per_rank(mla, h, g) == mla_mixer + latent + router + shared + split_experts + norms
    wl = Workload(weight_bits=4, weights_as_stored=False)
    assert P.weight_bytes_per_rank(mla, h, wl, g) == -(-P.params_per_rank(mla, h, g) * 4 // 8)
    # what a token reads on one rank: 16 of the 896 experts (tensor-split) or 2 whole ones (EP)
    n, one, k = P.experts_per_rank(kda, h, g)
    assert (n, one, k) == (896, 3 * 3584 * 384, 16)
    assert P.experts_per_rank(kda, h, g, ep=True) == (112, 3 * 3584 * 3072, 2)


CORPUS = "tests/fixtures/hf_corpus/"


def _nvfp4(rows: int, cols: int) -> int:
    """One NVFP4 tensor: 4-bit weights, an fp8 scale per 16 of a row, fp32 global and input scales."""
    return rows * cols // 2 + rows * (cols // 16) + 8


def _fp8_block(rows: int, cols: int) -> int:
    """One fp8 tensor with an fp32 scale per 128 x 128 block."""
    return rows * cols + -(-rows // 128) * -(-cols // 128) * 4


def _mxfp4(rows: int, cols: int) -> int:
    """One MXFP4 tensor: 4-bit weights, a uint8 (e8m0) scale per 32 of a row."""
    return rows * cols // 2 + rows * (cols // 32)


@pytest.mark.parametrize("g", [2, 4, 8])
def test_mxfp4_experts_beside_bf16_attention_per_rank_by_hand(g):
    """Kimi K3's MLA layer: bf16 attention (q_a, kv_a and their norms whole; q_b, kv_b, o and the
    output gate 1/g), the latent projections in MXFP4 whole, 896 MXFP4 experts 1/g of each."""
    from placer.specs.workload import Workload

    m = load_model("kimi-k3-hf", text_only=True)
    x, h = _layer(m, "layers.3"), m.hidden_size
    n, ql, kvr, dn, dr, dv = 96 // g, 1536, 512, 128, 64, 128
    mla = h * ql + ql + ql * n * (dn + dr) + h * (kvr + dr) + kvr + kvr * n * (dn + dv) + n * dv * h + h * n * dv
    e, i, lat = 896, 3072 // g, 3584
    bf16 = 2 * (mla + e * h + e + lat + 3 * h * (2 * 3072) // g + 2 * h)   # + router, latent norm, shared, norms
    latent = _mxfp4(lat, h) + _mxfp4(h, lat)
    experts = e * (2 * _mxfp4(i, lat) + _mxfp4(lat, 3072 // g))
    stored = Workload()
    assert P.weight_bytes_per_rank(x, h, stored, g) == bf16 + latent + experts
    ep_experts = -(-e // g) * (2 * _mxfp4(3072, lat) + _mxfp4(lat, 3072))
    assert P.weight_bytes_per_rank(x, h, stored, g, ep=True) == bf16 + latent + ep_experts
    assert P.allowed_degrees(m, [1, 2, 4, 8], workload=stored) == ([1, 2, 4, 8], {})


@pytest.mark.parametrize("g", [2, 4, 8])
def test_nvfp4_with_bf16_attention_per_rank_by_hand(g):
    """MiniMax-M2.5-NVFP4: attention excluded (bf16; 8 KV heads, one per rank past 8; full-width
    q/k norms follow their heads), router bf16 whole, 256 NVFP4 experts 1/g of each with each
    slice keeping its tensor's global and input scales."""
    from placer.specs.workload import Workload

    m = load_model(CORPUS + "nvidia--MiniMax-M2.5-NVFP4.json")
    x, h = _layer(m, "layers.1"), m.hidden_size
    nq, kv, d = 48 // g, max(1, 8 // g), 128
    attn = h * nq * d + 2 * h * kv * d + nq * d * h + nq * d + kv * d
    e, i = 256, 1536 // g
    bf16 = 2 * (attn + e * h + e + 2 * h)
    experts = e * (2 * _nvfp4(i, h) + _nvfp4(h, i))
    assert P.weight_bytes_per_rank(x, h, Workload(), g) == bf16 + experts


@pytest.mark.parametrize("g", [2, 4, 8])
def test_fp8_block_per_rank_by_hand(g):
    """DeepSeek-V3's MoE layer in fp8 with 128 x 128 blocks: q_a and kv_a whole (with their
    scales), q_b / kv_b by head rows, o by columns; experts and the shared expert 1/g, their scale
    blocks split with them; norms and router bf16."""
    from placer.specs.workload import Workload

    m = load_model(CORPUS + "deepseek-ai--DeepSeek-V3.json")
    x, h = _layer(m, "layers.3"), m.hidden_size
    n = 128 // g
    mla = (_fp8_block(1536, h) + _fp8_block(n * 192, 1536) + _fp8_block(576, h) + _fp8_block(n * 256, 512)
           + _fp8_block(h, n * 128))
    i = 2048 // g
    mlp = 257 * (2 * _fp8_block(i, h) + _fp8_block(h, i))     # 256 routed experts and 1 shared
    bf16 = 2 * (1536 + 512 + 256 * h + 256 + 2 * h)
    assert P.weight_bytes_per_rank(x, h, Workload(), g) == mla + mlp + bf16


def test_stored_slices_that_cut_a_scale_block_are_refused():
    """At tp 32 DeepSeek-V3's dense MLP (width 18432) would hold 576 rows per rank, 4.5 blocks of
    128: refused (vLLM's fp8 block check refuses it too); --weight-bits flattens the formats and plans it."""
    from placer.specs.workload import Workload

    m = load_model(CORPUS + "deepseek-ai--DeepSeek-V3.json")
    ok, refused = P.allowed_degrees(m, [8, 16, 32], workload=Workload())
    assert ok == [8, 16]
    assert refused[32] == "layers.0: mlp.gate_proj.weight: a slice of 576 rows cuts its 128x128 scale blocks"
    flat = Workload(weight_bits=8, weights_as_stored=False)
    assert P.allowed_degrees(m, [32], workload=flat)[0] == [32]
    with pytest.raises(ValueError, match="scale blocks"):
        P.shard_model(m, Workload(), 32)


def test_mxfp4_expert_slices_inside_a_group_point_to_expert_parallelism():
    """gpt-oss-120b: 2880-wide experts at tp 4 leave 720 columns per rank, 22.5 groups of 32."""
    from placer.specs.workload import Workload

    m = load_model(CORPUS + "openai--gpt-oss-120b.json")
    ok, refused = P.allowed_degrees(m, [2, 4], workload=Workload())
    assert ok == [2] and refused[4].endswith("a slice of 720 columns cuts its groups of 32 (--ep keeps experts whole)")
    assert P.allowed_degrees(m, [4], ep=True, workload=Workload())[0] == [4]
