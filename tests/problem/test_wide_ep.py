"""Wide expert parallelism (groups of whole nodes) and redundant experts: per-rank bytes counted by
hand, the groups formed, the refusals, the validator's own rule, and the NVL72 racks end to end."""

from __future__ import annotations

import copy

import pytest

from placer import Placement, Requirements, SolverSettings, plan
from placer.mapping.validate import validate_mapping
from placer.problem.instance import Layout, group_instance
from placer.problem.parallel import model_refusal, weight_bytes_per_rank
from placer.problem.reductions.attention_dp import dp_weight_bytes_per_rank
from placer.problem.reductions.tensor_parallel import group_fleet, group_link_us
from placer.specs.errors import InvalidSpec
from placer.specs.experts import divisible_copies, redundant_experts, with_redundant_experts
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import Workload

# DeepSeek-V3's routed expert (config.json: hidden_size 7168, moe_intermediate_size 2048, SwiGLU:
# gate, up and down projections, no bias)
H, WIDTH, E = 7168, 2048, 256
EXPERT = 3 * H * WIDTH                     # 44,040,192 parameters


def _dsv3(copies: int = 0):
    m = load_model("deepseek-v3")
    return with_redundant_experts(m, copies) if copies else m


def _moe_layer(m):
    return next(x for x in m.layers if x.ffn == "moe" and x.index is not None)


@pytest.mark.parametrize("copies, held", [(0, 16), (32, 18)])
def test_attention_dp_rank_bytes_by_hand_with_and_without_redundant_experts(copies, held):
    # attention data parallelism over 16 ranks (2 nodes of 8): every rank keeps the layer whole but
    # its routed experts, of which (256 + copies) / 16: 16 without copies, 18 with 32
    m = _dsv3(copies)
    x = _moe_layer(m)
    wl = Workload(weight_bits=8, weight_group_size=0)
    whole = x.params                     # the spec's count of the whole layer (all 256 experts)
    by_hand = whole - E * EXPERT + held * EXPERT
    assert dp_weight_bytes_per_rank(x, m.hidden_size, wl, 16) == by_hand     # 8-bit: a byte a parameter
    # the validator's own rule gives the same bytes
    from placer.mapping import dp_ranks

    assert dp_ranks.dp_rank_weight_bytes(x, m.hidden_size, wl, 16) == by_hand


def test_expert_parallel_rank_bytes_count_the_copies_and_the_validator_agrees():
    from placer.mapping import ranks

    wl = Workload(weight_bits=8, weight_group_size=0)
    plain, copied = _dsv3(), _dsv3(32)
    a, b = _moe_layer(plain), _moe_layer(copied)
    # tp 16 with experts spread whole: 16 experts a rank, 18 with 32 copies; the rest alike
    extra = weight_bytes_per_rank(b, copied.hidden_size, wl, 16, True) - weight_bytes_per_rank(
        a, plain.hidden_size, wl, 16, True)
    assert extra == 2 * EXPERT
    assert ranks.rank_weight_bytes(b, copied.hidden_size, wl, 16, True) == weight_bytes_per_rank(
        b, copied.hidden_size, wl, 16, True)


def test_redundant_experts_refused_where_the_runtimes_refuse_them():
    m = _dsv3(30)
    assert redundant_experts(m) == 30
    why = model_refusal(m, 72, True)
    assert "286 physical experts do not divide over 72 ranks" in why and "--redundant-experts 32" in why
    assert divisible_copies(256, 30, 72) == 32 and divisible_copies(256, 0, 16) == 0
    assert "need experts spread whole" in model_refusal(_dsv3(32), 8, False)       # tensor-split experts
    assert "need experts spread whole" in model_refusal(_dsv3(32), 1, True)
    assert model_refusal(_dsv3(32), 16, True) is None          # 288 experts, 18 a rank
    with pytest.raises(ValueError, match="no MoE layers"):
        with_redundant_experts(load_model("llama-3.1-8b"), 4)


def test_groups_of_whole_nodes_and_their_links():
    fleet = load_fleet("h100", racks=3)
    derived, members = group_fleet(fleet, 16)
    assert members == (tuple(f"r0g{i}" for i in range(8)) + tuple(f"r1g{i}" for i in range(8)),)
    assert [d.id for d in derived.devices] == ["r0g0"]
    # the first member's links: 7 inside its node at 2 us, 8 to the other node at 4 us
    assert group_link_us(fleet, members[0]) == pytest.approx((7 * 2 + 8 * 4) / 15)
    with pytest.raises(InvalidSpec, match="not a multiple of the node size 8"):
        group_fleet(fleet, 12)
    with pytest.raises(InvalidSpec, match="spans 4 nodes of 8; h100 has 3"):
        group_fleet(fleet, 32)


def test_layouts_span_nodes_only_with_experts_spread():
    from placer.planning.layouts import device_layouts

    m, fleet = _dsv3(), load_fleet("h100", racks=2)
    tp_only = device_layouts(m, fleet, degrees=[16], ep=False)
    assert tp_only.allowed == () and "no node of h100 has 16" in tp_only.refused[(16, False)]
    assert device_layouts(m, fleet, degrees=[16], ep=True).allowed == ((16, True),)
    assert device_layouts(m, fleet, degrees=[16], attention_dp=True).attention_dp == (16,)


def _wide_plan(copies: int, racks: int = 2, tp: int = 16):
    m = _dsv3(copies)
    fleet = load_fleet("h100", racks=racks)
    wl = Workload(concurrency=32, context_tokens=8192, weight_bits=8, weight_group_size=0)
    return m, plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=True, degrees=(tp,))),
                   SolverSettings(time_limit=20, threads=1))


def test_wide_plan_is_proven_records_its_copies_and_validates():
    m, p = _wide_plan(32)
    r, doc = p.result, p.mapping
    assert r.proven_optimal and r.devices_used == 16
    assert doc["parallel"] == {"tp": 16, "ep": 16, "reserve": None, "attention_dp": True, "redundant_experts": 32}
    assert doc["stages"][0]["group"]["racks"] == [0, 1]
    assert validate_mapping(doc) == []
    # a stated count the degree does not divide is rejected, naming it
    wrong = copy.deepcopy(doc)
    wrong["parallel"]["redundant_experts"] = 30
    kinds = {(v.kind, "286 physical experts" in v.message) for v in validate_mapping(wrong)}
    assert ("group_mismatch", True) in kinds
    # a count that divides but is not the one placed: the stage's bytes no longer add up
    fewer = copy.deepcopy(doc)
    fewer["parallel"]["redundant_experts"] = 16
    assert validate_mapping(fewer) != []
    # a group's racks are its devices' racks
    moved = copy.deepcopy(doc)
    moved["stages"][0]["group"]["racks"] = [0, 2]
    assert any("states racks [0, 2]" in v.message for v in validate_mapping(moved))


def test_copies_cost_what_they_hold():
    _, without = _wide_plan(0)
    _, with_copies = _wide_plan(32)
    # 2 more experts a rank in each of the 58 MoE layers, a byte a parameter
    grew = with_copies.mapping["stages"][0]["bytes"]["weights"] - without.mapping["stages"][0]["bytes"]["weights"]
    assert grew == 58 * 2 * EXPERT


def test_one_nvl72_rack_holds_an_expert_parallel_group_of_72():
    m = _dsv3(32)
    fleet = load_fleet("gb200-nvl72")
    assert {d.rack for d in fleet.devices} == {0} and len(fleet.devices) == 72
    inst = group_instance(m, fleet, Workload(concurrency=72, context_tokens=8192, weight_bits=8),
                          Layout(tp=72, attention_dp=True))
    assert inst.n_devices == 1 and len(inst.members(0)) == 72
    assert group_link_us(fleet, inst.members(0)) == 2.0          # NVLink alone


def test_redundant_experts_are_refused_on_a_wafer_fleet_naming_why():
    from placer.planning.layouts import device_layouts

    found = device_layouts(_dsv3(32), load_fleet("wse-3"))
    assert found.allowed == () and "need experts spread whole" in found.refused[(1, False)]
    with pytest.raises(InvalidSpec, match="need experts spread whole"):
        found.require_some(_dsv3(32))


# DeepEP's low-latency figures at EP 16 (placer.problem.all_to_all): dispatch 63 GB/s, combine
# 74 GB/s, scaled by h100's 50 GB/s inter-node port over the reference 50 GB/s (1x); the slowest
# link the first member has is a 4 us hop between nodes, paid once by each of the two
def _a2a_pair_us(tokens: int) -> float:
    dispatch = tokens * 8 * H * (1 + 4 / 128)        # FP8 plus a 4-byte scale per 128 values
    combine = tokens * 8 * H * 2                      # BF16
    return 4 + dispatch / 63e9 * 1e6 + 4 + combine / 74e9 * 1e6


def test_a_group_spanning_nodes_prices_its_all_to_alls_at_their_sizes_in_the_latency_level():
    # attention data parallel over 2 nodes: only the 58 MoE layers communicate, each a dispatch and
    # a combine at ceil(32 / 16) = 2 tokens a rank (not 2 x 15 ring steps at the mean link)
    _, p = _wide_plan(32)
    s = p.mapping["summary"]
    by_hand = 58 * _a2a_pair_us(2)
    assert by_hand == pytest.approx(58 * (8 + 118_272 / 63e3 + 229_376 / 74e3))
    assert s["group_latency_us"] == pytest.approx(by_hand) and s["hop_latency_us"] == pytest.approx(by_hand)
    latency = next(lv for lv in p.result.levels if lv.name == "latency")
    assert latency.proven and latency.value == latency.bound == pytest.approx(by_hand)
    # the validator prices it alike, and refuses the ring steps the level once summed
    assert validate_mapping(p.mapping) == []
    ring = copy.deepcopy(p.mapping)
    ring["summary"]["group_latency_us"] = ring["summary"]["hop_latency_us"] = 58 * 2 * 15 * (7 * 2 + 8 * 4) / 15
    assert any(v.kind == "summary_mismatch" and "group_latency_us" in v.message for v in validate_mapping(ring))


def test_a_spanning_group_under_ep_keeps_ring_all_reduces_beside_its_all_to_alls():
    m = _dsv3()
    fleet = load_fleet("h100", racks=2)
    wl = Workload(concurrency=40, context_tokens=8192, weight_bits=8, weight_group_size=0)
    p = plan(m, fleet, wl, Requirements(placement=Placement(expert_parallel=True, degrees=(16,))),
             SolverSettings(time_limit=20, threads=1))
    link = (7 * 2 + 8 * 4) / 15                       # the mean of the first member's links
    ring = 2 * 15 * link
    # the embedding and the 3 dense layers' all-reduces (1 and 2 each), one all-reduce in each of
    # the 58 MoE layers beside its pair at ceil(40 / 16) = 3 tokens a rank
    by_hand = ring * (1 + 3 * 2 + 58) + 58 * _a2a_pair_us(3)
    assert p.mapping["summary"]["group_latency_us"] == pytest.approx(by_hand)
    assert validate_mapping(p.mapping) == []


def test_the_plan_report_prices_a_spanning_group_over_the_links_between_nodes():
    from placer.problem.all_to_all import group_links

    links = group_links(load_fleet("h100", racks=2), [f"r{r}g{i}" for r in range(2) for i in range(8)])
    # the slowest latency is the hop between nodes (4 us), not NVLink's 2 us
    assert links.spans and links.latency_us == 4.0 and links.inter_bytes_per_s == 50e9
