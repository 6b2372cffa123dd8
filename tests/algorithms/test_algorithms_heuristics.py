"""The published rule (typepack), first-fit decreasing and greedy next-fit on named instances."""

from __future__ import annotations

from algo_instances import brute_bin_packing, fleet, instance

from placer.algorithms import place
from placer.problem.instance import make_instance
from placer.problem.placement import Status, stages_of
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for


def test_typepack_gives_the_published_59_wafers_for_kimi_k3():
    """24 MLA layers one per wafer, 69 KDA layers two per wafer: 24 + 35 = 59."""
    m = load_model("kimi-k3")
    inst = make_instance(m, load_fleet("wse-3t"), workload_for(m), mode="free")
    r = place(inst, "typepack")
    assert r.status == Status.HEURISTIC and r.devices_used == 59
    assert r.stats["devices_by_kind"] == {"dense": 24, "linear_attention": 35}
    stages = stages_of(inst, r.assignment)
    mla = [s for s in stages if any(inst.nodes[i].mixer == "mla" for i in s.nodes)]
    assert len(mla) == 24 and all(len(s.nodes) == 1 for s in mla)
    # a free placement revisits wafers: every layer boundary between two wafers is a hop
    assert r.hops == sum(1 for u, v in inst.edges if r.assignment[u] != r.assignment[v])
    assert r.concurrency_ceiling == 184


def test_typepack_puts_each_dense_node_alone_and_packs_the_rest_by_kind():
    """Dense nodes (KV > 0) of 3 bytes alone on 10-byte devices; linear nodes 4 + 4, 4 + 4, 4."""
    inst = instance([4, 3, 4, 4, 3, 4, 4], 10, mode="free", kv=[0, 1, 0, 0, 1, 0, 0])
    r = place(inst, "typepack")
    assert r.devices_used == 2 + 3
    assert r.stats["devices_by_kind"] == {"dense": 2, "linear_attention": 3}
    assert r.assignment[1] != r.assignment[4]
    assert sum(1 for a in r.assignment if a == r.assignment[1]) == 1


def test_typepack_says_it_takes_no_pins():
    inst = instance([4, 4], 10, mode="free", pins=["0=r0w1"])
    r = place(inst, "typepack")
    assert r.status == Status.UNKNOWN and r.assignment is None and "pins" in r.message


def test_ffd_is_a_heuristic_with_a_known_gap():
    """[5, 5, 4, 4, 3, 3] on devices of 12: FFD packs 5+5, 4+4+3, 3 = 3 devices; 5+4+3 twice = 2."""
    weights = [5, 5, 4, 4, 3, 3]
    inst = instance(weights, 12, mode="free")
    r = place(inst, "ffd")
    assert r.status == Status.HEURISTIC and r.devices_used == 3
    assert brute_bin_packing(weights, 12) == 2 and r.lower_bound_devices == 2


def test_ffd_fills_larger_devices_first():
    """One 20-byte and two 10-byte devices; items 9, 6, 5: 9 + 6 + 5 = 20 all on the large device."""
    fl = fleet(None, groups=[(10, 1, 2), (20, 1, 1)])
    inst = instance([6, 9, 5], mode="free", fleet_spec=fl)
    r = place(inst, "ffd")
    assert r.devices_used == 1 and inst.devices[r.assignment[0]].memory_bytes == 20


def test_greedy_walks_to_the_lowest_latency_neighbour_then_larger_capacity():
    """Rack 0 holds two 10-byte devices, rack 1 two 30-byte ones; intra-rack 2 us, inter-rack 3 us.
    The walk starts on the largest device (r1w0), stays in its rack (r1w1), then crosses to rack 0."""
    fl = fleet(None, groups=[(10, 1, 2), (30, 1, 2)])
    inst = instance([10, 20, 30, 10, 10], fleet_spec=fl)
    r = place(inst, "greedy")
    assert r.stats["path"] == ["r1w0", "r1w1", "r0w0", "r0w1"]
    # next-fit: 10+20 | 30 | 10 | 10
    assert [len(s.nodes) for s in stages_of(inst, r.assignment)] == [2, 1, 1, 1]
    assert r.hop_latency_us == 2 + 3 + 2


def test_greedy_walk_can_cost_latency_the_dp_path_saves():
    """Racks of 2 and 3 identical devices. Three stages: greedy starts on r0w0, fills its rack of 2
    and crosses (2 + 3 = 5 us); the DP's path stays in the rack of 3 (2 + 2 = 4 us), proven."""
    fl = fleet(None, groups=[(10, 1, 2), (10, 1, 3)])
    inst = instance([10, 10, 10], fleet_spec=fl)
    g, d = place(inst, "greedy"), place(inst, "dp")
    assert g.devices_used == d.devices_used == 3
    assert g.hop_latency_us == 5 and d.hop_latency_us == 4
    assert d.level("latency").proven and d.level("latency").bound == 4 and d.level("devices").proven
