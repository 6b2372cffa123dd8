"""Stages as groups of devices: the reduction, the reserve, the choice of degree, the validator."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import fewest_segments

from placer.mapping import instance_from_mapping
from placer.mapping.validate import validate_mapping
from placer.planning import (
    Placement,
    Requirements,
    SolverSettings,
    Targets,
    build_instance,
    place_instance,
    search_layouts,
)
from placer.problem import memory
from placer.problem import parallel as P
from placer.problem.instance import Layout, make_instance
from placer.problem.reductions.tensor_parallel import default_degrees, group_fleet
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict, load_fleet
from placer.specs.model import load_model, model_from_dict
from placer.specs.reserve import Reserve, parse_reserve
from placer.specs.workload import Workload, workload_for


def _gpus(racks=2, per_rack=8, memory="80 GB", reserve=None, unavailable=()):
    dev = {"memory": memory, "kind": "gpu"}
    if reserve is not None:
        dev["reserve"] = reserve
    return fleet_from_dict({"name": "gpus", "device": dev,
                            "fleet": {"racks": racks, "per_rack": per_rack, "unavailable": list(unavailable),
                                      "intra_rack_latency_us": 2, "inter_rack_latency_us": 4}})


# ----------------------------------------------------------------------------- reserve
def test_parse_reserve_forms():
    assert parse_reserve("0.1") == Reserve(Fraction(1, 10), 0)
    assert parse_reserve("10%") == Reserve(Fraction(1, 10), 0)
    assert parse_reserve("8 GB") == Reserve(Fraction(0), 8 * 10**9)
    assert parse_reserve("0.1 + 3.5 GB") == Reserve(Fraction(1, 10), 3_500_000_000)
    assert parse_reserve(0.05).of(80 * 10**9) == 4 * 10**9
    # exact: ceil(0.1 x 80,000,000,001) = 8,000,000,001 (a float would round either way)
    assert Reserve(Fraction(1, 10)).of(80_000_000_001) == 8_000_000_001
    assert Reserve.from_dict(parse_reserve("0.1+2GB").to_dict()) == parse_reserve("0.1+2GB")
    for bad in ("banana", "1.5", True, ""):
        with pytest.raises(ValueError):
            parse_reserve(bad)


def test_catalog_gpu_reserve_and_wafers_none():
    # 0.1 of 80 GB + 3.5 GB (vLLM's 0.9 utilisation plus workspace); wafers keep what their spec says
    assert load_fleet("h100").devices[0].type.reserve_bytes == 11_500_000_000
    assert load_fleet("h200").devices[0].type.reserve_bytes == 14_100_000_000 + 3_500_000_000
    assert load_fleet("wse-3t").devices[0].type.reserve_bytes == 0


def test_reserve_comes_off_every_device_before_placement():
    m = load_model("llama-3.1-8b")
    wl = workload_for(m)
    inst = make_instance(m, _gpus(reserve="0.25"), wl)
    act = memory.activation_buffer_bytes(m.layers, wl)
    assert inst.reserve_bytes[0] == 20 * 10**9
    assert inst.capacity_bytes[0] == 60 * 10**9 - act
    # --reserve overrides the spec's
    inst2 = make_instance(m, _gpus(reserve="0.25"), wl, layout=Layout(reserve=parse_reserve("1 GB")))
    assert inst2.capacity_bytes[0] == 79 * 10**9 - act
    with pytest.raises(InvalidSpec, match="leaves nothing"):
        _gpus(reserve="80 GB")


# ----------------------------------------------------------------------------- the reduction
def test_group_fleet_chunks_available_devices_of_each_node():
    fleet = _gpus(racks=2, per_rack=8, unavailable=["r0g1"])
    derived, members = group_fleet(fleet, 4)
    # node 0 has 7 available: one group of 4 (r0g0, r0g2, r0g3, r0g4), three left over
    assert members == (("r0g0", "r0g2", "r0g3", "r0g4"), ("r1g0", "r1g1", "r1g2", "r1g3"),
                       ("r1g4", "r1g5", "r1g6", "r1g7"))
    assert [d.id for d in derived.devices] == ["r0g0", "r1g0", "r1g4"]
    lat = {frozenset(key): x for key, (x, _) in derived.link_table.items()}
    assert lat == {frozenset(("r0g0", "r1g0")): 4, frozenset(("r0g0", "r1g4")): 4,
                   frozenset(("r1g0", "r1g4")): 2}
    with pytest.raises(InvalidSpec, match="no node of gpus has 16 available devices"):
        group_fleet(fleet, 16)


def test_pins_apply_to_group_members_and_unavailable_devices_are_in_no_group():
    m = load_model("llama-3.1-70b")
    wl = workload_for(m, context="8k", concurrency=1)
    fleet = _gpus(racks=2, per_rack=8, unavailable=["r1g2"])
    inst = make_instance(m, fleet, wl, layout=Layout(tp=4), pins=["0-10=r0g6"])
    assert inst.pins[0].device == "r0g4"
    with pytest.raises(InvalidSpec, match="unavailable device 'r1g2'"):
        make_instance(m, fleet, wl, layout=Layout(tp=4), pins=["0=r1g2"])
    with pytest.raises(InvalidSpec, match="r1g7 is in no group of 4"):
        make_instance(m, fleet, wl, layout=Layout(tp=4), pins=["0=r1g7"])
    solved = place_instance(build_instance(m, fleet, wl, Requirements(placement=Placement(pins=("0-10=r0g6",))), tp=4), SolverSettings(time_limit=10, threads=1))
    stage = next(s for s in solved.mapping["stages"] if "layers.0" in s["layers"])
    assert stage["group"]["devices"] == ["r0g4", "r0g5", "r0g6", "r0g7"]
    assert validate_mapping(solved.mapping, model=m, fleet=fleet) == []


def test_refused_degree_and_split_mode():
    m = load_model("llama-3.1-70b")
    wl = workload_for(m)
    with pytest.raises(InvalidSpec, match="cannot run at tp 3: layers.0: 64 attention heads do not divide"):
        make_instance(m, _gpus(), wl, layout=Layout(tp=3))
    with pytest.raises(InvalidSpec, match="split mode"):
        make_instance(m, _gpus(), wl, layout=Layout(tp=2), mode="split")
    search = search_layouts(m, _gpus(), wl, Requirements(placement=Placement(degrees=[3, 8], attention_dp=False), targets=Targets(objective="lex")), SolverSettings(time_limit=5, threads=1))
    assert search.refused == {3: "layers.0: 64 attention heads do not divide by tp 3 (--tp 2 divides them)"}
    assert [s.instance.tp for s in search.solved] == [8]


def test_default_degrees():
    m = load_model("llama-3.1-70b")
    assert default_degrees(m, _gpus(per_rack=8)) == ([1, 2, 4, 8], {})
    assert default_degrees(m, load_fleet("wse-3t")) == ([1], {})
    assert default_degrees(load_model("kimi-k3"), _gpus())[0] == [1]


def test_infeasible_degree_counts_gpus_not_groups():
    """llama-3.1-70b at tp 2 on 1.2 GB GPUs: a layer's rank is 855,670,784 B of weights (855,638,016
    split parameters / 2 + 16,384 replicated norm parameters, 2 B each), the embedding's and LM
    head's 128,256 x 8,192 / 2 x 2 B = 1,050,673,152 B, so no two of the 82 nodes share a group:
    82 groups = 164 GPUs are needed; one node of 8 GPUs is 4 groups."""
    from placer.planning.studies.explain import diagnose

    m = load_model("llama-3.1-70b")
    wl = workload_for(m)
    fleet = _gpus(racks=1, per_rack=8, memory="1.2 GB", reserve="0")
    solved = place_instance(build_instance(m, fleet, wl, Requirements(), tp=2),
                            SolverSettings(time_limit=5, threads=1))
    assert P.weight_bytes_per_rank(m.layers[1], 8192, wl, 2) == 855_670_784
    assert solved.result.status == "infeasible"
    assert solved.result.lower_bound_devices == 164
    assert solved.result.message.startswith("at least 164 GPUs (82 groups of 2) are needed (")
    assert solved.result.message.endswith("; the fleet has 8 GPUs (4 groups of 2) available")
    e = diagnose(solved.instance)
    assert "82 nodes on 8 GPUs (4 groups of 2) available" in e.text()
    assert e.culprits[0].startswith("at least 164 GPUs (82 groups of 2) are needed (")
    # degree 1 keeps counting devices: whole layers of 1,711,341,568 B, no two on a 2.4 GB GPU
    one = place_instance(build_instance(m, _gpus(racks=1, per_rack=8, memory="2.4 GB", reserve="0"), wl,
                                        Requirements(), tp=1), SolverSettings(time_limit=5, threads=1))
    assert one.result.message.startswith("at least 82 devices are needed (")
    assert one.result.message.endswith("; the fleet has 8 available")


@pytest.mark.parametrize("tp", [8, 4])
def test_llama_70b_h100_128k_32_per_gpu_bytes(tp):
    m = load_model("llama-3.1-70b")
    fleet = load_fleet("h100")
    wl = workload_for(m, context="128k", concurrency=32)
    solved = place_instance(build_instance(m, fleet, wl, Requirements(), tp=tp),
                            SolverSettings(time_limit=20, threads=1))
    doc, r = solved.mapping, solved.result
    assert validate_mapping(doc, model=m, fleet=fleet) == []
    assert doc["parallel"] == {"tp": tp, "ep": 1, "reserve": None}
    # per GPU at tp 8: a layer is 213,942,272 B of weights and 32 x 131,072 x 512 B of KV
    per_layer = P.weight_bytes_per_rank(m.layers[1], 8192, wl, tp) + 32 * 131_072 * 4096 // tp
    assert solved.instance.demand_bytes[1] == per_layer
    for s in doc["stages"]:
        assert len(s["group"]["devices"]) == tp
        assert len({fleet.by_id[d].rack for d in s["group"]["devices"]}) == 1
        b = s["bytes"]
        assert b["reserve"] == 11_500_000_000 and b["free"] >= 0
        assert b["weights"] + b["kv_reserve"] + b["state"] + b["activations"] + b["reserve"] + b["free"] == 80 * 10**9
    # every group of tp counts tp GPUs; 24 GPUs is the proven fewest at both degrees
    assert r.devices_used == doc["summary"]["devices_used"] == len(doc["stages"]) * tp == 24
    assert r.proven_optimal and r.lower_bound_devices == 24
    # the mapping reloads as the same instance (degree and reserve)
    _, _, _, again = instance_from_mapping(doc)
    assert again.tp == tp and again.demand_bytes == solved.instance.demand_bytes


def test_validator_recomputes_per_rank_bytes_and_groups():
    m = load_model("llama-3.1-70b")
    fleet = _gpus(racks=2, per_rack=8)
    wl = workload_for(m, context="8k", concurrency=4)
    good = place_instance(build_instance(m, fleet, wl, Requirements(), tp=8),
                          SolverSettings(time_limit=10, threads=1)).mapping
    assert validate_mapping(good, model=m, fleet=fleet) == []
    bad = copy.deepcopy(good)
    bad["stages"][0]["bytes"]["weights"] += 1
    found = validate_mapping(bad, model=m, fleet=fleet)
    assert [v.kind for v in found] == ["bytes_mismatch"]
    bad = copy.deepcopy(good)
    bad["stages"][0]["group"]["devices"][7] = "r1g7"     # a member of another node
    kinds = {v.kind for v in validate_mapping(bad, model=m, fleet=fleet)}
    assert "group_mismatch" in kinds
    bad = copy.deepcopy(good)
    bad["parallel"]["tp"] = 3
    found = validate_mapping(bad, model=m, fleet=fleet)
    assert any(v.kind == "group_mismatch" and "layers.0: query heads 64 is not a multiple of the degree 3" in v.message
               for v in found)


def test_ep_mapping_validates_and_differs_from_tensor_split_when_experts_do_not_divide():
    # 10 experts on 4 ranks: EP's heaviest rank holds 3 whole experts, tensor-split 10 quarters
    spec = dict(name="toy-moe", hidden_size=64, vocab_size=256, num_layers=4, pattern="A*4",
                mixers={"a": {"type": "gqa", "num_heads": 4, "num_kv_heads": 4, "head_dim": 16}},
                ffns={"m": {"type": "moe", "num_experts": 10, "experts_per_token": 2, "moe_intermediate_size": 32}},
                layer_types={"A": {"mixer": "a", "ffn": "m"}})
    m = model_from_dict(spec)
    fleet = _gpus(racks=1, per_rack=8, memory="1 MB")
    wl = Workload(context_tokens=64, concurrency=2)
    ep = place_instance(build_instance(m, fleet, wl, Requirements(), tp=4, ep=True),
                        SolverSettings(time_limit=5, threads=1))
    split = place_instance(build_instance(m, fleet, wl, Requirements(), tp=4), SolverSettings(time_limit=5, threads=1))
    assert validate_mapping(ep.mapping, model=m, fleet=fleet) == []
    assert validate_mapping(split.mapping, model=m, fleet=fleet) == []
    assert ep.mapping["stages"][0]["group"]["ep"] == 4 and split.mapping["parallel"]["ep"] == 1
    assert ep.instance.weight_bytes[1] - split.instance.weight_bytes[1] == 2 * (
        3 * 3 * 64 * 32 - 10 * 3 * 64 * 8)


def test_ep_all_to_all_moves_the_width_the_experts_receive():
    """Two MoE layers at the hidden width 64 and two latent MoE layers (experts at a 16-wide latent),
    2 experts per token, bf16 activations, EP over 4 ranks on 2 us links: per token each dispatch
    or combine moves 2 x 64 x 2 = 256 B on the plain layers and 2 x 16 x 2 = 64 B on the latent ones;
    the attention all-reduces (one per layer) stay at the hidden width, 128 B."""
    from placer.simulate.cost import collective_time_us, segments_of

    moe = {"type": "moe", "num_experts": 8, "experts_per_token": 2, "moe_intermediate_size": 32}
    spec = dict(name="toy-latent-moe", hidden_size=64, vocab_size=256, num_layers=4, pattern="AALL",
                mixers={"a": {"type": "gqa", "num_heads": 4, "num_kv_heads": 4, "head_dim": 16}},
                ffns={"m": moe, "l": {**moe, "latent_size": 16, "latent_norm": True}},
                layer_types={"A": {"mixer": "a", "ffn": "m"}, "L": {"mixer": "a", "ffn": "l"}})
    m = model_from_dict(spec)
    fleet = fleet_from_dict({"name": "gpus", "device": {"memory": "1 GB", "kind": "gpu", "memory_bandwidth": 1e12},
                             "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 2}})
    solved = place_instance(build_instance(m, fleet, Workload(context_tokens=64, concurrency=2),
                                           Requirements(), tp=4, ep=True), SolverSettings(time_limit=5,
                                                                                          threads=1))
    (seg,) = segments_of(solved.instance, solved.result.assignment)     # the whole toy fits one group
    ar, latent, plain = seg.collectives
    assert (ar.kind, ar.count, ar.bytes_per_token) == ("all_reduce", 4 + 1, 128)
    assert (latent.kind, latent.group_size, latent.count, latent.bytes_per_token) == ("all_to_all", 4, 4, 64)
    assert (plain.kind, plain.group_size, plain.count, plain.bytes_per_token) == ("all_to_all", 4, 4, 256)
    # a step of 3 requests: 3 latent tokens of 64 B per all-to-all, 3 steps of one 2 us link each
    assert latent.time_us(3) == pytest.approx(4 * collective_time_us("all_to_all", 4, 3 * 64, 2.0, None))
    assert latent.latency_us == 2.0


# ----------------------------------------------------------------------------- CP-SAT against brute force
@st.composite
def _problem(draw):
    hidden = draw(st.sampled_from([64, 128]))
    heads = draw(st.sampled_from([4, 8]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4) if heads % h == 0]))
    n = draw(st.integers(2, 7))
    width = draw(st.sampled_from([96, 128, 192, 256]))
    spec = dict(name="rand", hidden_size=hidden, vocab_size=draw(st.sampled_from([256, 1000])), num_layers=n,
                pattern=f"A*{n}",
                mixers={"a": {"type": "gqa", "num_heads": heads, "num_kv_heads": kv, "head_dim": 16}},
                ffns={"f": {"type": "dense", "intermediate_size": width}},
                layer_types={"A": {"mixer": "a", "ffn": "f"}})
    m = model_from_dict(spec)
    wl = Workload(context_tokens=draw(st.sampled_from([16, 256])), concurrency=draw(st.integers(0, 6)))
    layer = memory.layer_demand_bytes(m.layers[1], wl)
    mem = draw(st.integers(layer // 3, 3 * layer))
    racks, per_rack = draw(st.integers(1, 2)), draw(st.sampled_from([2, 4]))
    fleet = _gpus(racks=racks, per_rack=per_rack, memory=f"{mem} B", reserve=draw(st.sampled_from(["0", "0.1"])))
    return m, fleet, wl


def _brute_devices(m, fleet, wl):
    """Fewest devices over degrees 1, 2, 4 and every contiguous split, by enumeration."""
    best = None
    dev = fleet.devices[0]
    per_rack = len(fleet.devices) // len({d.rack for d in fleet.devices})
    act = memory.activation_buffer_bytes(m.layers, wl)
    for g in (1, 2, 4):
        if g > per_rack or P.model_refusal(m, g) is not None:
            continue
        groups = len({d.rack for d in fleet.devices}) * (per_rack // g)
        cap = dev.memory_bytes - dev.type.reserve.of(dev.memory_bytes) - act
        demand = [P.weight_bytes_per_rank(x, m.hidden_size, wl, g)
                  + wl.concurrency * (P.kv_bytes_per_request_per_rank(x, m.hidden_size, wl, g)
                                      + P.state_bytes_per_request_per_rank(x, m.hidden_size, wl, g))
                  for x in m.layers]
        k = fewest_segments(demand, cap, groups)
        if k is not None:
            best = k * g if best is None else min(best, k * g)
    return best


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_problem())
def test_cpsat_over_degrees_equals_brute_force(problem):
    m, fleet, wl = problem
    want = _brute_devices(m, fleet, wl)
    degrees = [g for g in (1, 2, 4) if g <= len(fleet.devices)]
    search = search_layouts(m, fleet, wl, Requirements(placement=Placement(degrees=degrees, attention_dp=False), targets=Targets(objective="lex")), SolverSettings(time_limit=10, threads=1))
    r = search.best.result
    if want is None:
        assert not r.feasible
        return
    assert r.feasible and r.devices_used == want
    assert search.devices_proven
    assert validate_mapping(search.best.mapping, model=m, fleet=fleet) == []


# ----------------------------------------------------------------------------- exports and the simulator
def _llama_tp8():
    m = load_model("llama-3.1-70b")
    fleet = load_fleet("h100")
    wl = workload_for(m, context="128k", concurrency=32)
    return m, fleet, place_instance(build_instance(m, fleet, wl, Requirements(), tp=8),
                                    SolverSettings(time_limit=20, threads=1))


def test_exports_state_the_degrees():
    from placer.export import export_mapping

    m, fleet, solved = _llama_tp8()
    doc = solved.mapping
    vllm = export_mapping(doc, "vllm").text
    assert "--pipeline-parallel-size 3" in vllm and "--tensor-parallel-size 8" in vllm
    assert "VLLM_PP_LAYER_PARTITION=26,28,26" in vllm
    assert "--tp-size 8" in export_mapping(doc, "sglang").text
    assert "--tensor-model-parallel-size 8" in export_mapping(doc, "megatron").text


def test_ep_exports_enable_expert_parallel():
    from placer.export import export_mapping

    m = load_model("qwen3-235b")
    fleet = load_fleet("h200", racks=8)
    solved = place_instance(build_instance(m, fleet, workload_for(m), Requirements(), tp=8, ep=True),
                            SolverSettings(time_limit=20, threads=1))
    doc = solved.mapping
    assert validate_mapping(doc, model=m, fleet=fleet) == []
    text = export_mapping(doc, "vllm").text
    assert "--tensor-parallel-size 8" in text and "--enable-expert-parallel" in text
    assert "--ep-size 8" in export_mapping(doc, "sglang").text


def test_simulator_costs_the_all_reduces_of_a_tensor_parallel_stage():
    from placer.simulate.cost import collective_time_us, segments_of

    m, fleet, solved = _llama_tp8()
    inst = solved.instance
    segs = segments_of(inst, solved.result.assignment)
    first = segs[0]
    (ar,) = first.collectives
    # embedding + layers 0-25: 2 all-reduces per decoder layer and one for the embedding, of the
    # 8192-wide bf16 hidden state over 8 GPUs on NVLink (2 us, 450 GB/s); the spec's fitted fixed
    # time per collective replaces the ring's 2 (g - 1) link latencies, the ring's bytes remain, at
    # the spec's fitted share of the link's bandwidth
    assert (ar.kind, ar.group_size, ar.count, ar.bytes_per_token) == ("all_reduce", 8, 53, 16384)
    fixed = inst.devices[first.device].type.collective_latency_us
    share = inst.devices[first.device].type.collective_bandwidth_efficiency
    assert fixed > 0 and ar.fixed_us == fixed and 0 < share < 1
    ring = 2 * 7 * (2 + 16384 / 8 / 450_000)
    assert collective_time_us("all_reduce", 8, 16384, 2, 450e9) == pytest.approx(ring)
    assert ar.bandwidth_bytes_per_s == pytest.approx(450e9 * share)
    assert ar.time_us(1) == pytest.approx(53 * (fixed + 2 * 7 * 16384 / 8 / (450_000 * share)))
    # a rank reads its own share of the weights: 1/8 of each layer (plus replicated norms)
    assert first.costs[1].weight_bytes == 213_942_272
