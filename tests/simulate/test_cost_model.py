"""The cost model's operations by hand (each at its roofline, GEMMs saturating with their token
count, routed experts at their own rate, fixed-time collectives), the perf fields' validation, and
the calibration: it prices a step as the simulator does, its corpus is checked, its constants stay
inside their ranges, and the specs hold its fit."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from dirs import BENCHMARKS

from placer import load_fleet
from placer.problem.instance import Layout, make_instance
from placer.simulate import Traffic, segments_of, simulate
from placer.simulate.cost import Collective, cached_tokens, collective_time_us, node_cost
from placer.simulate.prefill import Chunk, step_terms
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

sys.path.insert(0, str(BENCHMARKS))
import calibrate_simulator as cal  # noqa: E402

PERF = {"fixed_overhead_us_per_layer": 10, "fixed_overhead_us_per_stage": 5,
        "fixed_overhead_us_per_layer_per_request": 0.5, "fixed_overhead_us_per_moe_layer": 7,
        "bandwidth_efficiency": 0.5, "expert_bandwidth_efficiency": 0.25, "compute_efficiency": 0.5,
        "collective_latency_us": 3}


def _fleet(perf=PERF):
    return _gpu(perf)


# two attention + MoE layers: 8 experts of 3 x 64 x 16 x 2 B = 6,144 B, 2 per token
MOE = model_from_dict({"name": "moe2", "hidden_size": 64, "vocab_size": 100, "num_layers": 2, "pattern": "M*2",
                       "mixers": {"attention": {"type": "gqa", "num_heads": 2, "num_kv_heads": 1, "head_dim": 32}},
                       "ffns": {"moe": {"type": "moe", "num_experts": 8, "experts_per_token": 2,
                                        "moe_intermediate_size": 16}},
                       "layer_types": {"M": {"mixer": "attention", "ffn": "moe"}}}, source="moe2")


def test_step_time_of_a_moe_segment_by_hand():
    inst = make_instance(MOE, _fleet(), Workload(context_tokens=100))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    assert (seg.layers, seg.moe_layers) == (4, 2)          # embedding, 2 MoE layers, lm_head
    moe = node_cost(inst, 1)
    assert (moe.num_experts, moe.experts_per_token, moe.expert_bytes) == (8, 2, 6144)
    b, ctx = 3, 100
    touched = 8 * (1 - (1 - 2 / 8) ** 3)                    # 4.625 experts per MoE layer
    assert moe.expert_bytes_read(b) == pytest.approx(touched * 6144)
    t = seg.terms_for(b, cached_tokens([ctx] * b, seg.windows()))
    # fixed: 5 per stage + (10 + 0.5 x 3) per layer x 4 layers + 7 per MoE layer x 2
    assert t.fixed_us == pytest.approx(5 + 11.5 * 4 + 14)
    assert t.expert_bytes == pytest.approx(2 * touched * 6144)
    # dense: embedding rows (3 x 128 B), lm_head (12,928 B), the MoE layers' always part, KV reads
    dense = 3 * 128 + 12928 + 2 * 25856 + 2 * 128 * b * ctx
    assert t.bytes == pytest.approx(dense)
    # the operations by hand: dense weights (embedding rows, lm_head, the MoE layers' always part:
    # attention 12,288 + router 512 + norms 128 params), their GEMMs over the 3 tokens; attention
    # over 3 x 100 cached tokens per layer (64 KV elements, 2 query heads per KV head: 4 FLOPs per
    # element); the touched experts' weights and their 2 x 2 x 3,072 FLOPs per token and layer
    weights = 3 * 128 + 12928 + 2 * 25856
    assert t.weight_bytes == pytest.approx(weights)
    assert t.gemm_flops == pytest.approx(b * 2 * (64 + 6464 + 2 * 12928))
    assert t.flops - t.gemm_flops == pytest.approx(2 * 64 * 4 * b * ctx)
    assert t.expert_flops == pytest.approx(2 * b * 2 * 2 * 3072)
    assert t.tokens == b and t.expert_tokens == pytest.approx(b * 2 / touched)
    # rates: dense at 1 TB/s x 0.5, experts at 1 TB/s x 0.25, compute at 1 PFLOPS x 0.5 (B or FLOP per
    # us); every operation is at its roofline, the slower of its bytes and its FLOPs
    expected = (t.fixed_us + max(weights / 500_000, t.gemm_flops / 5e8)
                + max(2 * 128 * b * ctx / 500_000, 2 * 64 * 4 * b * ctx / 5e8)
                + max(t.expert_bytes / 250_000, t.expert_flops / 5e8))
    assert seg.duration_us(t) == pytest.approx(expected, rel=1e-12)
    assert seg.time_us([ctx] * b) == pytest.approx(expected, rel=1e-12)


def test_experts_default_to_the_dense_rate_and_a_missing_term_costs_nothing():
    perf = {k: v for k, v in PERF.items() if k not in ("expert_bandwidth_efficiency",
                                                        "fixed_overhead_us_per_layer_per_request",
                                                        "fixed_overhead_us_per_moe_layer")}
    inst = make_instance(MOE, _fleet(perf), Workload(context_tokens=100))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    assert seg.expert_bytes_per_us == seg.bytes_per_us == 500_000
    assert seg.fixed_us(1) == seg.fixed_us(64) == 5 + 10 * 4


def test_group_collectives_pay_the_fixed_time_and_the_wire():
    inst = make_instance(MOE, _fleet(), Workload(context_tokens=100), layout=Layout(tp=2))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    (ar,) = seg.collectives
    # five all-reduces of the 64 x 2 B hidden state (two per layer, one for the embedding)
    assert (ar.kind, ar.count, ar.group_size, ar.bytes_per_token, ar.fixed_us) == ("all_reduce", 5, 2, 128, 3.0)
    # one all-reduce of b = 4 tokens over 100 GB/s: 3 us + 2 (g - 1) x (4 x 128 / 2) B / 1e5 B/us
    wire = 2 * 1 * (4 * 128 / 2) / 1e5
    assert ar.time_us(4) == pytest.approx(5 * (3 + wire), rel=1e-12)
    # without a fixed time: the ring pays the 2 us link latency at each of its 2 (g - 1) steps
    ring = Collective("all_reduce", 2, 128, count=5, latency_us=2.0, bandwidth_bytes_per_s=1e11)
    assert ring.time_us(4) == pytest.approx(5 * collective_time_us("all_reduce", 2, 512, 2.0, 1e11))
    assert ring.time_us(4) == pytest.approx(5 * 2 * (2 + 512 / 2 / 1e5))
    assert Collective("all_reduce", 1, 128, fixed_us=3.0).time_us(4) == 0.0


@pytest.mark.parametrize("field, value", [("expert_bandwidth_efficiency", 0), ("expert_bandwidth_efficiency", 1.5),
                                          ("collective_latency_us", -1), ("fixed_overhead_us_per_moe_layer", -2),
                                          ("fixed_overhead_us_per_layer_per_request", "fast"),
                                          ("collective_bandwidth_efficiency", 1.5), ("compute_fp4_speedup", 0.5)])
def test_bad_perf_fields_name_the_field(field, value):
    with pytest.raises(InvalidSpec, match=field):
        _fleet(dict(PERF, **{field: value}))


def test_a_gemm_saturates_with_its_token_count():
    """gemm_us: M / (M + half) of the rate; roofline_us: each operation the slower of bytes and FLOPs."""
    from placer.simulate.cost import Terms, gemm_us, roofline_us
    assert gemm_us(1e6, 64, 1e3, 64) == pytest.approx(2e3)          # half the rate at M = half
    assert gemm_us(1e6, 6400, 1e3, 64) == pytest.approx(1e3 * 6464 / 6400)
    assert gemm_us(1e6, 4, 1e3, 0) == pytest.approx(1e3)
    # weights 1e6 B at 1e3 B/us = 1,000 us against 1e5 FLOPs (M = 10, half 10) at 1e3 FLOP/us = 200 us
    t = Terms(7.0, 1e6, 1e5, 2.0, weight_bytes=1e6, gemm_flops=1e5, tokens=10)
    assert roofline_us(t, 1e3, 1e3, 1e3, 10) == pytest.approx(7 + 1000 + 2)
    # compute-bound at 1e7 FLOPs: 2e4 us
    t = Terms(0.0, 1e6, 1e7, weight_bytes=1e6, gemm_flops=1e7, tokens=10)
    assert roofline_us(t, 1e3, 1e3, 1e3, 10) == pytest.approx(2e4)


def _gpu(perf, **device):
    return fleet_from_dict({"name": "g", "device": {"kind": "gpu", "memory": "1 GB", "memory_bandwidth": "1 TB/s",
                                                    "compute": "1 PFLOPS", "perf": perf, **device},
                            "fleet": {"racks": 1, "per_rack": 2, "intra_rack_latency_us": 2,
                                      "intra_rack_bandwidth": "100 GB/s"}}, source="g")


def test_attention_runs_at_the_16_bit_rate():
    """roofline_us: the weight GEMMs at their rate, attention's FLOPs at the attention rate."""
    from placer.simulate.cost import Terms, roofline_us
    # GEMMs 1e6 FLOPs at 2e3 FLOP/us = 500 us; attention 2e6 FLOPs at 1e3 = 2,000 us (no bytes)
    t = Terms(0.0, 0.0, 3e6, gemm_flops=1e6, tokens=100)
    assert roofline_us(t, 1e3, 1e3, 2e3, 0.0, 1e3) == pytest.approx(500 + 2000)
    assert roofline_us(t, 1e3, 1e3, 2e3, 0.0) == pytest.approx(500 + 1000)      # default: the GEMMs' rate


@pytest.mark.parametrize("bits, gemm, attention", [(16, 0.5e9, 0.5e9), (8, 1e9, 0.5e9), (4, 1.5e9, 0.5e9)])
def test_weight_gemms_follow_the_precision_and_attention_stays_at_16_bits(bits, gemm, attention):
    """Peak 1 PFLOPS at 16 bits, 2 at 8, compute_efficiency 0.5, 4-bit GEMMs 1.5x the 8-bit rate:
    FLOP/us = peak x 0.5 / 1e6 (x 1.5 for 4-bit weights); attention at the 16-bit peak always."""
    fleet = _gpu({"compute_efficiency": 0.5, "compute_fp4_speedup": 1.5}, compute_fp8="2 PFLOPS")
    inst = make_instance(MOE, fleet, Workload(context_tokens=100, weight_bits=bits))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    assert (seg.flops_per_us, seg.attention_flops_per_us) == (pytest.approx(gemm), pytest.approx(attention))


def test_collectives_reach_a_share_of_the_link():
    """collective_bandwidth_efficiency 0.5: the all-reduce's bytes over half the 100 GB/s link."""
    fleet = _gpu(dict(PERF, collective_bandwidth_efficiency=0.5))
    inst = make_instance(MOE, fleet, Workload(context_tokens=100), layout=Layout(tp=2))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    (ar,) = seg.collectives
    assert ar.bandwidth_bytes_per_s == pytest.approx(0.5e11)
    # five all-reduces of b = 4 tokens x 128 B: 3 us + 2 (g - 1) x (4 x 128 / 2) B / 5e4 B/us each
    assert ar.time_us(4) == pytest.approx(5 * (3 + 2 * (4 * 128 / 2) / 5e4), rel=1e-12)


MLA = model_from_dict({"name": "mla1", "hidden_size": 64, "vocab_size": 100, "num_layers": 1, "pattern": "A",
                       "mixers": {"attention": {"type": "mla", "num_heads": 4, "kv_lora_rank": 32,
                                                "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16}},
                       "ffns": {"mlp": {"type": "dense", "intermediate_size": 64}},
                       "layer_types": {"A": {"mixer": "attention", "ffn": "mlp"}}}, source="mla1")


def test_mla_prefill_runs_the_cheaper_of_its_two_forms():
    """MLA of 4 heads, latent r = 32, dn = dv = 16, dr = 8 (40 KV elements a token). Absorbed (decode):
    4 x 2 (2 x 32 + 8) = 576 FLOPs a (query, key) pair; un-absorbed: 4 x 2 (16 + 8 + 16) = 320 a pair
    plus the cached prefix's latent up-projected, 4 x 2 x 32 x (16 + 16) = 8,192 a position. A fresh
    10-token prompt (55 pairs) runs un-absorbed, 320 x 55; a 2-token verify over 1,000 cached
    positions (1,001 + 1,002 pairs) absorbed: 576 x 2,003 < 320 x 2,003 + 8,192 x 1,000."""
    from placer.simulate.prefill import chunk_terms
    inst = make_instance(MLA, _fleet(), Workload(context_tokens=2000))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    (mla,) = [c for c in seg.costs if c.kv_elements_per_token]
    assert (mla.kv_elements_per_token, mla.attention_flops_per_kv * 40) == (40, pytest.approx(576))
    assert (mla.mha_flops_per_pair, mla.mha_flops_per_cached) == (320, 8192)
    fresh, verify = chunk_terms(seg, (Chunk(0, 10),)), chunk_terms(seg, (Chunk(1000, 2),))
    assert fresh.flops - fresh.gemm_flops == pytest.approx(320 * 55)
    assert verify.flops - verify.gemm_flops == pytest.approx(576 * 2003)
    # tensor parallel 2: each rank runs half the heads
    inst2 = make_instance(MLA, _fleet(), Workload(context_tokens=2000), layout=Layout(tp=2))
    (seg2,) = segments_of(inst2, [0] * inst2.n_nodes)
    (mla2,) = [c for c in seg2.costs if c.kv_elements_per_token]
    assert (mla2.mha_flops_per_pair, mla2.mha_flops_per_cached) == (160, 4096)


def test_ttft_steps_of_a_closed_loop_by_hand():
    """Four requests of 3,000-token prompts, steps of 8,192 tokens, one run in ten a burst: the burst's
    12,000 tokens take two steps (requests 1-2 done after the first, 3-4 after the second), the
    others wait half a decode step and their own prompt's step."""
    from calibration_corpus import ttft_steps

    from placer.simulate.cost import Terms
    inst = make_instance(MOE, _fleet(), Workload(context_tokens=4000))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    decode = Terms(0.0, 0.0, 0.0)
    steps = ttft_steps(seg, 3000, 4, decode)
    assert [(round(s.share, 6), s.terms.tokens, s.decodes, s.floor_us, s.after_decode) for s in steps] == [
        (0.45, 0.0, 4, 0.0, False), (0.9, 3000.0, 0, 0.0, False), (0.1, 8192.0, 0, 0.0, False),
        (0.05, 3808.0, 0, 0.0, False)]
    assert steps[0].terms is decode


def test_ttft_steps_with_a_receive_interval_the_overlap_scheduler_and_an_eager_floor():
    """SGLang receiving every 10 decode steps (a request waits 5 on average), its overlap scheduler
    (1 step more: the one already queued), a chunk of 16,384 tokens (the burst of 12,000 in one
    step, all four done after it) and a 50 ms eager floor on every prefill step, the lone prompt's
    launch overlapping the decode step it waits behind."""
    from calibration_corpus import ttft_steps

    from placer.simulate.cost import Terms
    inst = make_instance(MOE, _fleet(), Workload(context_tokens=4000))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    steps = ttft_steps(seg, 3000, 4, Terms(0.0, 0.0, 0.0), budget=16384, recv_interval=10, overlap=1,
                       floor_us=5e4)
    assert [(round(s.share, 6), s.terms.tokens, s.decodes, s.floor_us, s.after_decode) for s in steps] == [
        (0.9 * (10 / 2 + 1), 0.0, 4, 0.0, False), (0.9, 3000.0, 0, 5e4, True), (0.1, 12000.0, 0, 5e4, False)]


def test_a_ttft_point_prices_its_steps_at_their_eager_floor(monkeypatch):
    """Mean TTFT = sum of share x step time: the decode wait (5.4 steps of 10 ms), the lone prompt
    (40 ms modelled, floor 80 ms less the 10 ms decode step its launch overlaps: 70 ms) and the
    burst (150 ms, above its floor): 5.4 x 10 + 0.9 x 70 + 0.1 x 150 = 132 ms."""
    from calibration_corpus import Step, Work

    from placer.simulate.cost import Terms
    times = {4: 1e4, 1000: 4e4, 8000: 1.5e5}
    monkeypatch.setattr(cal, "_gpu_step", lambda x, w, t, decodes: times[int(t.tokens)])
    steps = (Step(5.4, Terms(0.0, 0.0, 0.0, tokens=4), 4), Step(0.9, Terms(0.0, 0.0, 0.0, tokens=1000), 0, 8e4, True),
             Step(0.1, Terms(0.0, 0.0, 0.0, tokens=8000), 0, 8e4))
    w = Work(None, 0.0, (), (), 4, 4, 8, (), steps=steps)
    assert cal.gpu_predict(np.zeros(10), w) == pytest.approx(5.4 * 1e4 + 0.9 * 7e4 + 0.1 * 1.5e5)


# ----------------------------------------------------------------------------- calibration
@pytest.fixture(scope="module")
def corpus():
    return cal.load_corpus()


def test_corpus_has_the_points_it_promises(corpus):
    counted = [p for p in corpus if p.set in ("fit", "held_out")]
    gpus = [p for p in counted if p.hardware in cal.GPU_SPECS]
    wafers = [p for p in counted if p.hardware == "wse-3"]
    assert len(gpus) >= 40 and len(wafers) >= 12 and len([p for p in corpus if p.hardware == "wse-3"]) >= 15
    assert {p.hardware for p in gpus} >= {"h100", "h200", "b200"}
    assert {p.runtime for p in gpus} >= {"vllm", "sglang", "tensorrt-llm"}
    assert any(p.concurrency == "saturate" for p in gpus) and any(p.concurrency == 1 for p in gpus)
    assert any(p.set == "held_out" for p in gpus) and any(p.set == "held_out" for p in wafers)
    # held-out points come from publications the fit never sees
    fit_pubs = {p.publication for p in corpus if p.set == "fit"}
    assert not fit_pubs & {p.publication for p in corpus if p.set == "held_out"}
    for p in corpus:
        assert p.source and p.date and p.runtime and p.publication, p.id
        # what a source leaves out is marked, and decides where the point may go: speculative
        # decoding (not modelled) never in the fit or the held-out set, an unstated layout never fitted
        assert (p.speculative == "not_stated") == ("speculative" in p.unstated), p.id
        if p.speculative == "stated":
            assert p.set == "excluded", p.id
        if p.set == "fit":
            assert "layout" not in p.unstated, p.id


def test_corpus_rejects_a_bad_point(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("points:\n  - {id: x, set: fit, hardware: h100, model: llama-3.1-8b}\n")
    with pytest.raises(SystemExit, match="weight_bits: missing"):
        cal.load_corpus(bad)
    bad.write_text(Path(cal.CORPUS).read_text().replace("set: fit", "set: maybe", 1))
    with pytest.raises(SystemExit, match="set/metric"):
        cal.load_corpus(bad)
    bad.write_text(Path(cal.CORPUS).read_text().replace("concurrency: saturate", "concurrency: lots", 1))
    with pytest.raises(SystemExit, match="concurrency"):
        cal.load_corpus(bad)
    bad.write_text(Path(cal.CORPUS).read_text().replace("scheduler_recv_interval: 10", "scheduler_recv_interval: 0", 1))
    with pytest.raises(SystemExit, match="scheduler_recv_interval: a positive integer"):
        cal.load_corpus(bad)


def test_the_calibration_prices_a_step_as_the_simulator_does(corpus):
    """gpu_predict(constants, a point's decode step) == the segment's duration with those constants
    in the spec (the calibration's terms are the simulator's at unit constants)."""
    from calibration_corpus import setup, work
    from calibration_write import gpu_values
    # FP8 on H200 (TP 8: all-reduces at a share of the link) and NVFP4 on B200 (TP 8 with EP: the
    # 4-bit rate), a prompt chunk in the step so that attention's 16-bit rate and the GEMMs' count
    x = np.array([0.8, 0.6, 0.5, 100.0, 12.0, 0.05, 40.0, 9.0, 0.7, 1.5])
    for pid in ("h200x8-deepseek-r1-sglang-c8", "b200x8-deepseek-r1-fp4-sglang-c8"):
        p = next(q for q in corpus if q.id == pid)
        values = gpu_values(x)
        if p.hardware not in cal.FP4_DEVICES:
            values.pop("compute_fp4_speedup")
        inst, assignment = setup(p, values)
        (seg,) = segments_of(inst, assignment)
        b = p.concurrency
        cached = cached_tokens([p.isl + p.osl // 2] * b, seg.windows())
        by_spec = step_terms(seg, b, cached, (Chunk(0, p.isl),))
        w = work(p)
        (unit,) = w.segments
        step = step_terms(unit, b, cached_tokens([p.isl + p.osl // 2] * b, unit.windows()), (Chunk(0, p.isl),))
        assert w.devices == 8 and w.batch == b
        w = cal.Work(p, w.measured_us, w.segments, (step,), b, b, 8, w.peaks)
        assert cal.gpu_predict(x, w) == pytest.approx(seg.duration_us(by_spec), rel=1e-3)   # gpu_values rounds


def test_wafer_closed_form_matches_the_discrete_event_simulator(corpus):
    from calibration_corpus import setup, work
    from calibration_write import wafer_values
    p = next(q for q in corpus if q.id == "cs3-llama-3.1-405b-2024-11")
    w = work(p)
    assert w.devices == 21 and sum(s.layers for s in w.segments) == 128
    names = ("fixed_overhead_us_per_layer",)
    x = np.array([2.0])
    inst, assignment = setup(p, wafer_values(names, x))
    sim = simulate(inst, assignment, Traffic(requests=1, output_tokens=8, context=p.isl + p.osl // 2))
    # (the run's contexts grow by a token a step: KV reads differ from the mean by parts in 1e6)
    assert sim.per_user_tokens_per_s == pytest.approx(1e6 / cal.wafer_predict_for(names)(x, w), rel=1e-5)


@pytest.fixture(scope="module")
def fitted(corpus):
    fams = cal.families(corpus)
    return fams, {f.name: cal.evaluate(f) for f in fams}


def test_wafer_fit_explains_8b_70b_and_405b_within_25_percent(fitted):
    fams, results = fitted
    rows = {x["work"].point.id: x for x in results[fams[1].name]["rows"]}
    for pid in ("cs3-llama-3.1-8b-2024-08", "cs3-llama-3.1-70b-2024-08", "cs3-llama-3.1-405b-2024-11"):
        r = cal.error(rows[pid]["work"], rows[pid]["fitted"])
        assert 1 / 1.25 <= r <= 1.25, (pid, r)
    # the launch release's per-wafer cost is measured by its one publication alone: held out, each of its
    # points takes that constant from the other point and the per-layer cost from the other publications
    assert rows["cs3-llama-3.1-8b-2024-08"]["release_from_siblings"]
    assert not rows["cs3-llama-3.1-405b-2024-11"]["release_from_siblings"]
    fit_rows = [r for r in rows.values() if r["work"].point.set == "fit"]
    assert len(fit_rows) >= 8 and all(r["loso"] is not None for r in fit_rows)


def test_a_release_only_its_publication_measured_is_predicted_from_its_other_points():
    """Hand-computed: step = a * k + b@r1 * m. Publication "new" (release cur) fixes a = 1; publication
    "old" (release r1) holds u1 (k 1, m 1, 3 us) and u2 (k 2, m 1, 5 us). Held out, u1 takes a = 1 from
    "new" and b@r1 = 5 - 2 = 3 from u2: 4 us; u2 takes b@r1 = 3 - 1 = 2 from u1: 4 us."""
    from types import SimpleNamespace as NS

    def pt(pid, pub, rel):
        return NS(id=pid, publication=pub, release=rel, set="fit", metric="user_tokens_per_s")

    def predict(x, w):
        return x[0] * w.k + (x[1] * w.m if w.point.release == "r1" else 0.0)

    works = [NS(point=pt("v1", "new", "cur"), k=1, m=0, measured_us=1.0),
             NS(point=pt("v2", "new", "cur"), k=3, m=0, measured_us=3.0),
             NS(point=pt("u1", "old", "r1"), k=1, m=1, measured_us=3.0),
             NS(point=pt("u2", "old", "r1"), k=2, m=1, measured_us=5.0)]
    ranges = {"a": (0.1, 10.0, "", ""), "b": (0.1, 10.0, "", "")}
    fam = cal.Family("toy", ("a", "b@r1"), ranges, predict, works)
    rows = {r["work"].point.id: r for r in cal.evaluate(fam)["rows"]}
    assert rows["u1"]["loso"] == pytest.approx(4.0, rel=1e-4) and rows["u1"]["release_from_siblings"]
    assert rows["u2"]["loso"] == pytest.approx(4.0, rel=1e-4)
    # "new" held out: a and b@r1 from "old" alone (a + b = 3, 2a + b = 5: a = 2), so v2 = 6 us
    assert rows["v2"]["loso"] == pytest.approx(6.0, rel=1e-4) and not rows["v2"]["release_from_siblings"]


def test_gpu_fit_is_inside_its_ranges_and_its_leave_one_source_out_errors(fitted):
    fams, results = fitted
    gpu = fams[0]
    assert cal.at_bounds(gpu, results[gpu.name]["x"]) == []
    lo, hi = gpu.bounds()
    assert len(cal.at_bounds(gpu, lo)) == len(gpu.names) == len(cal.at_bounds(gpu, hi))
    rows = [r for r in results[gpu.name]["rows"] if r["work"].point.set == "fit"]
    errs = [cal.counted(r) for r in rows if not cal.is_ttft(r["work"])]
    errs = [max(e, 1 / e) for e in errs if e is not None]
    assert len(errs) >= 40 and sorted(errs)[len(errs) // 2] <= 1.15 and max(errs) <= 1.5
    # TTFT points are never fitted: the full fit does not move when they are dropped, and each has a
    # leave-one-source-out prediction
    ttft = [r for r in rows if cal.is_ttft(r["work"])]
    assert len(ttft) >= 8 and all(r["loso"] is not None for r in ttft)
    again = cal.fit(gpu, [w for w in gpu.works if w.point.set == "fit" and not cal.is_ttft(w)])
    assert np.allclose(again, results[gpu.name]["x"])


def test_specs_hold_the_fit(fitted):
    """The perf blocks are what the calibration fits today (rerun it with --write after a corpus change)."""
    from calibration_write import gpu_values, wafer_values
    fams, results = fitted
    gpu = gpu_values(results[fams[0].name]["x"])
    for name in (*cal.GPU_SPECS, *cal.UNMEASURED_NVIDIA):     # no NVIDIA spec keeps a stale copy of the set
        t = load_fleet(name).available[0].type
        for k in ("fixed_overhead_us_per_moe_layer", "bandwidth_efficiency", "collective_latency_us",
                  "compute_efficiency", "compute_half_saturation_tokens", "fixed_overhead_us_per_layer",
                  "fixed_overhead_us_per_layer_per_request", "collective_bandwidth_efficiency"):
            assert getattr(t, k) == pytest.approx(gpu[k], rel=2e-3), (name, k)
        # 4-bit tensor cores on Blackwell only: elsewhere 4-bit weights run at the 8-bit rate
        fp4 = gpu["compute_fp4_speedup"] if name in cal.FP4_DEVICES else 1.0
        assert t.compute_fp4_speedup == pytest.approx(fp4, rel=2e-3), name
    wafer = wafer_values(fams[1].names, results[fams[1].name]["x"])
    t = load_fleet("wse-3").available[0].type
    assert t.fixed_overhead_us_per_layer == pytest.approx(wafer["fixed_overhead_us_per_layer"], abs=1e-3)
    assert t.fixed_overhead_us_per_stage == pytest.approx(wafer["fixed_overhead_us_per_stage"], abs=1e-3)
    assert t.bandwidth_efficiency == 1.0 and not math.isnan(t.fixed_overhead_us_per_stage)


def test_error_bands_are_what_the_calibration_writes(fitted):
    """placer/simulate/data/error_bands.yaml is the calibration's today (rerun it with --write)."""
    import yaml
    from calibration_write import bands

    from placer.simulate.error_band import BANDS_PATH
    fams, results = fitted
    assert yaml.safe_load(BANDS_PATH.read_text()) == yaml.safe_load(yaml.safe_dump(bands(fams, results)))


def test_aiconfigurator_runs_each_point_as_measured(corpus):
    """compare_aiconfigurator: the estimate line of a point (its model, system, backend, precision,
    layout, lengths and batch) and its error in the point's own metric."""
    from calibration_corpus import work
    from compare_aiconfigurator import aic_error, command
    w = work(next(q for q in corpus if q.id == "h200x8-deepseek-r1-sglang-c8"))
    cmd = command(w, "aic")
    assert cmd[:3] == ["aic", "cli", "estimate"]
    args = dict(zip(cmd[3::2], cmd[4::2]))
    assert args == {"--model-path": "deepseek-ai/DeepSeek-V3", "--system": "h200_sxm", "--backend": "sglang",
                    "--estimate-mode": "agg", "--isl": "1024", "--osl": "1024", "--batch-size": "8",
                    "--gemm-quant-mode": "fp8_block", "--kvcache-quant-mode": "bfloat16", "--tp-size": "8",
                    "--moe-tp-size": "8", "--moe-ep-size": "1", "--moe-quant-mode": "fp8_block"}
    assert aic_error(w, {"tpot_ms": 12.8 / 2, "tokens_per_s": 1.0}) == pytest.approx(2.0)   # twice as fast
    t = work(next(q for q in corpus if q.id == "trtllm12-h200-tp2-llama-3.3-70b-1024-1024"))
    assert aic_error(t, {"tpot_ms": 1.0, "tokens_per_s": 2582 * 2 * 1.5}) == pytest.approx(1.5)  # per GPU x 2
    assert aic_error(t, {"error": "no data"}) is None
    # a TTFT point compares aiconfigurator's TTFT (none recorded: no error)
    f = work(next(q for q in corpus if q.id == "h200x8-deepseek-r1-sglang-c8-ttft"))
    assert command(f, "aic") == cmd
    assert aic_error(f, {"tpot_ms": 1.0, "tokens_per_s": 1.0, "ttft_ms": 330.6 / 4}) == pytest.approx(4.0)
    assert aic_error(f, {"tpot_ms": 1.0, "tokens_per_s": 1.0}) is None
