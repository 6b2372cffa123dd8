"""The simulator on the catalog: the calibration reproduces the published CS-3 speeds, the kimi-k3
mappings report every figure, and the command line prints them, draws a Gantt chart and compares
every mode's placement."""

from __future__ import annotations

import json

import pytest
from mapping_toys import kimi_mapping

from placer import load_fleet, load_model, make_instance, workload_for
from placer.algorithms import place
from placer.cli.simulate_cmd import simulate_command
from placer.mapping import instance_from_mapping, write_mapping
from placer.problem.instance import MODES, Layout
from placer.simulate import Traffic, segments_of, simulate, simulate_mapping

DESIGN_FIELDS = {"per_user_tokens_per_s", "aggregate_tokens_per_s", "itl_p50_us", "itl_p99_us", "live_requests",
                 "power_w", "tokens_per_s_per_mw", "joules_per_token", "stage_utilization", "bubble_fraction"}


def test_calibrated_wse3_by_hand_and_against_the_measured_405b():
    # the spec holds the constants of Cerebras' current serving release (benchmarks/
    # calibrate_simulator.py): one user's token costs, per wafer, its overhead, the per-layer cost
    # of each layer it runs, and its two operations (the weights' GEMMs, attention over the KV),
    # each the slower of its SRAM reads at the full 21 PB/s and its FLOPs at half of 125 PFLOPS,
    # plus the hops between wafers
    model, fleet = load_model("llama-3.1-405b"), load_fleet("wse-3")
    inst = make_instance(model, fleet, workload_for(model, context=1024, concurrency=1))
    res = place(inst, method="dp")
    assert res.devices_used == 21
    t = fleet.available[0].type
    assert (t.bandwidth_efficiency, t.compute_efficiency) == (1.0, 0.5)
    segs = segments_of(inst, res.assignment)
    assert sum(s.layers for s in segs) == 128                   # 126 decoder layers, embedding, lm_head
    token_us = 21 * t.fixed_overhead_us_per_stage + 128 * t.fixed_overhead_us_per_layer
    for s in segs:
        terms = s.terms_for(1, {w: 1024.0 for w in s.windows()})
        assert terms.expert_bytes == 0
        token_us += max(terms.weight_bytes / 21e9, terms.gemm_flops / 62.5e9)
        token_us += max((terms.bytes - terms.weight_bytes) / 21e9, (terms.flops - terms.gemm_flops) / 62.5e9)
    token_us += sum(inst.hop_us(a.device, b.device) + 16384 * 2 / 150_000 for a, b in zip(segs, segs[1:]))
    sim = simulate(inst, res.assignment, Traffic(requests=1, output_tokens=4, context=1026))
    assert sim.per_user_tokens_per_s == pytest.approx(1e6 / token_us, rel=1e-6)   # contexts 1023-1025
    # Cerebras, 2024-11: 969 tokens/s for one user (the corpus' point; wafer count undisclosed)
    assert 969 / 1.25 <= sim.per_user_tokens_per_s <= 969 * 1.25


def test_wse3t_is_derived_from_wse3():
    a, b = load_fleet("wse-3").available[0].type, load_fleet("wse-3t").available[0].type
    assert a.fixed_overhead_us_per_layer == b.fixed_overhead_us_per_layer
    assert a.bandwidth_efficiency == b.bandwidth_efficiency
    assert b.memory_bandwidth / a.memory_bandwidth == pytest.approx(43.2 / 21)


@pytest.fixture(scope="module")
def kimi():
    return {"contiguous": kimi_mapping("contiguous", "dp"), "free": kimi_mapping("free", "ffd")}


@pytest.mark.parametrize("mode", ["contiguous", "free"])
def test_kimi_k3_mapping_figures(kimi, mode):
    doc = kimi[mode]
    res = simulate_mapping(doc, output_tokens=3, context=262144, trace=True, decode_only=True)
    assert res.concurrency_cap == doc["summary"]["concurrency_ceiling"] == 184
    assert res.live_requests == 184 and res.requests_completed == 184
    n = doc["summary"]["devices_used"]
    assert len(res.stages) == n == len(res.stage_utilization)
    # the system boundary: 130 kW per CS-4 (an estimate, the spec says) shared by its 3 wafers
    assert res.power_boundary == "system" and res.power_w == pytest.approx(n * 130_000 / 3)
    assert res.hop_latency_us == pytest.approx(doc["summary"]["hop_latency_us"])
    _m, _f, _wl, inst = instance_from_mapping(doc)
    index = inst.device_index
    segs = segments_of(inst, [index[d] for d in doc["route"]])
    mean_ctx = 262144 - 1
    # a hop: the link latency plus 7168 x 2 B of activations at 2.4 Tb/s (300,000 B/us)
    assert segs[0].hop_time_us(1) == pytest.approx(segs[0].hop_us + 14336 / 300_000, rel=1e-12)
    serialisation = (len(segs) - 1) * 14336 / 300_000
    assert res.unloaded_token_latency_us == pytest.approx(
        sum(s.time_us([mean_ctx]) for s in segs) + doc["summary"]["hop_latency_us"] + serialisation, rel=1e-9)
    # continuous batching keeps one batch per stage in flight: ceil(184 / n) requests per step (vLLM's
    # limit of 256 does not bind); the wafer with the slowest step bounds the pipeline
    b = -(-184 // n)
    assert res.schedule == "continuous" and max(iv.batch for iv in res.trace) == b
    worst = max(sum(s.time_us([mean_ctx] * b) for s in segs if s.device == d) for d in {s.device for s in segs})
    assert res.pipeline_bound_tokens_per_s == pytest.approx(b * 1e6 / worst, rel=1e-9)
    assert res.aggregate_tokens_per_s <= res.pipeline_bound_tokens_per_s * 1.0001
    assert res.per_user_tokens_per_s < 1e6 / res.unloaded_token_latency_us


@pytest.mark.slow
def test_simulate_command_json_and_gantt(kimi, tmp_path, run_cli):
    path = tmp_path / "k3.json"
    write_mapping(path, kimi["contiguous"])
    png = tmp_path / "occupancy.png"
    code, out, err = run_cli(["simulate", path, "--requests", 12, "--output-tokens", 3, "--micro-batch", 2,
                              "--gantt", png, "--json", "--decode-only"])
    assert code == 0, err
    doc = json.loads(out)
    assert DESIGN_FIELDS <= set(doc)
    assert doc["micro_batch"] == 2 and doc["requests"] == 12 and doc["tokens"] == 36
    assert doc["schedule"] == "micro-batch"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the default schedule is continuous batching, and the report says so
    code, out, err = run_cli(["simulate", path, "--requests", 12, "--output-tokens", 3, "--max-batch", 4])
    assert code == 0, err
    assert "schedule: continuous batching (runtime vllm" in out and "up to 4 per step" in out
    # prefill is modelled by default: a closed loop of the 12 users, their time to first token reported
    assert "closed loop of 12 users" in out and "time to first token" in out
    assert "tokens/s per MW (system)" in out
    code, out, err = run_cli(["simulate", path, "--requests", 3, "--output-tokens", 2, "--max-batch", 4,
                              "--micro-batch", 2])
    assert code == 2 and err.startswith("error: --max-batch: max_batch:")
    code, out, err = run_cli(["simulate", path, "--requests", 4, "--output-tokens", 2, "--context-dist",
                              "uniform:64k:256k"])
    assert code == 0, err
    assert "per-user speed" in out and "tokens/s per MW" in out
    code, out, err = run_cli(["simulate", path, "--context-dist", "gamma:3"])
    assert code == 2 and err.startswith("error: --context-dist: context_dist:")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_simulate_compare_every_mode(run_cli, mode):
    """One mode of ``simulate --compare`` per case (rows are placed and simulated one mode at a time,
    and each takes tens of seconds: split, they run side by side under xdist)."""
    code, out, err = run_cli(["simulate", "--compare", "kimi-k3", "--hardware", "wse-3t", "--method", "dp",
                              "--output-tokens", 2, "--modes", mode, "--json"])
    assert code == 0, err
    (r,) = json.loads(out)["rows"]
    assert r["mode"] == mode
    if mode == "contiguous":
        assert r["devices_used"] == 70 and r["hops"] == 69
    if mode == "free":
        assert r["method"] == "ffd"              # dp does not place in free mode
        assert r["devices_used"] < 70            # the contiguous row's devices
    assert r["concurrency_ceiling"] == r["live_requests"] == 184
    assert r["tokens_per_s_per_mw"] == pytest.approx(r["aggregate_tokens_per_s"] / (r["power_w"] / 1e6))
    assert r["single_user_tokens_per_s"] > r["per_user_tokens_per_s"] > 0


def test_simulate_compare_takes_every_mode_by_default(run_cli):
    modes = next(p for p in simulate_command.params if p.name == "modes")
    assert modes.default == ",".join(MODES) == "contiguous,free,split"
    code, out, err = run_cli(["simulate", "--compare", "kimi-k3"])
    assert code == 2 and "--hardware" in err


@pytest.mark.slow
def test_simulate_all_modes_prints_the_comparison(run_cli):
    code, out, err = run_cli(["simulate", "kimi-k3", "--all-modes", "-H", "wse-3t", "--method", "dp",
                              "--modes", "contiguous", "--output-tokens", 2])
    assert code == 0, err
    assert "tok/s/MW" in out and "contiguous" in out


def test_gpu_constants_are_one_fit_and_reproduce_a_published_point():
    fields = ("fixed_overhead_us_per_layer", "fixed_overhead_us_per_layer_per_request",
              "fixed_overhead_us_per_moe_layer", "bandwidth_efficiency", "expert_bandwidth_efficiency",
              "compute_efficiency", "collective_latency_us")
    types = [load_fleet(n).available[0].type for n in ("h100", "h200", "b200")]
    for t in types[1:]:
        assert [getattr(t, f) for f in fields] == [getattr(types[0], f) for f in fields]
    # SemiAnalysisAI/InferenceX issue 870: DeepSeek-R1-0528 FP8 on 8 H200, SGLang v0.5.7, TP 8,
    # 1k/1k at 8 users, mean TPOT 12.8 ms; one of the calibration points, its decode step within 10%
    model = load_model("deepseek-v3")
    inst = make_instance(model, load_fleet("h200"), workload_for(model, context=2048, concurrency=8, weight_bits=8,
                                                                 kv_bits=16), layout=Layout(tp=8))
    (seg,) = segments_of(inst, [0] * inst.n_nodes)
    assert seg.time_us([1536] * 8) == pytest.approx(12_800, rel=0.10)


def test_eight_bit_weights_run_at_the_fp8_peak():
    model = load_model("llama-3.1-8b")
    fleet = load_fleet("h100")
    t = fleet.available[0].type
    assert t.compute_fp8_flops == 1979e12 and t.compute_flops == 989e12
    for bits, peak in [(16, 989e12), (8, 1979e12), (4, 1979e12)]:
        inst = make_instance(model, fleet, workload_for(model, context=1024, concurrency=1, weight_bits=bits))
        (seg,) = segments_of(inst, [0] * inst.n_nodes)
        assert seg.flops_per_us == pytest.approx(peak * t.compute_efficiency / 1e6)
